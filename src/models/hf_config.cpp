#include "models/hf_config.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "nn/json.h"

namespace zc::models {

namespace {

using json::Value;
using Family = PretrainedConfig::Family;

struct Architecture {
  const char* architecture;  // architectures[0]
  const char* model_type;
  Family family;
};
// Mistral is Llama's computation with an attention window; it is taken only where the window
// never applies (read_mistral_window).
constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", Family::llama},
    {"MistralForCausalLM", "mistral", Family::llama},
    {"GPT2LMHeadModel", "gpt2", Family::gpt2},
};

std::string known(bool architectures) {
  std::string s;
  for (const auto& a : kArchitectures) {
    if (!s.empty()) s += ", ";
    s += architectures ? a.architecture : a.model_type;
  }
  return s;
}

std::string real_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Typed reads of one JSON object's fields; a field that is absent or null takes the fallback
// (transformers' default), one of another kind is an error naming it.
class Fields {
 public:
  Fields(const Value& object, const std::string& origin, std::string prefix = "")
      : object_(object), origin_(origin), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(origin_ + ": \"" + prefix_ + key + "\" " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(origin_ + ": " + what); }

  const Value* get(const std::string& key) const {
    const Value* v = object_.find(key);
    return v && v->kind != Value::Kind::null ? v : nullptr;
  }

  int64_t integer(const std::string& key, int64_t fallback) const {
    const Value* v = get(key);
    if (!v) return fallback;
    if (v->kind != Value::Kind::integer) wrong_kind(key, "an integer", *v);
    return v->integer;
  }

  double real(const std::string& key, double fallback) const {
    const Value* v = get(key);
    if (!v) return fallback;
    if (!v->is_numeric()) wrong_kind(key, "a number", *v);
    return v->as_double();
  }

  double required_real(const std::string& key, const std::string& why) const {
    if (!get(key)) fail(key, "is missing (" + why + ")");
    return real(key, 0);
  }

  bool boolean(const std::string& key, bool fallback) const {
    const Value* v = get(key);
    if (!v) return fallback;
    if (v->kind != Value::Kind::boolean) wrong_kind(key, "true or false", *v);
    return v->boolean;
  }

  std::string string(const std::string& key, const std::string& fallback) const {
    const Value* v = get(key);
    if (!v) return fallback;
    if (v->kind != Value::Kind::string) wrong_kind(key, "a string", *v);
    return v->string;
  }

  const Value& object() const { return object_; }
  const std::string& origin() const { return origin_; }

 private:
  [[noreturn]] void wrong_kind(const std::string& key, const char* expected, const Value& v) const {
    fail(key,
         std::string("must be ") + expected + ", found " + std::string(json::kind_name(v.kind)));
  }

  const Value& object_;
  std::string origin_;
  std::string prefix_;
};

const Architecture& find_architecture(const Fields& f) {
  const std::string model_type = f.string("model_type", "");
  if (const Value* archs = f.get("architectures")) {
    if (archs->kind != Value::Kind::array || archs->array.empty() ||
        archs->array[0].kind != Value::Kind::string) {
      f.fail("architectures", "must be a list of class names, e.g. [\"LlamaForCausalLM\"]");
    }
    const std::string& name = archs->array[0].string;
    for (const auto& a : kArchitectures) {
      if (name != a.architecture) continue;
      if (!model_type.empty() && model_type != a.model_type) {
        f.fail("model_type", "is \"" + model_type + "\", but architectures names " + name +
                                 " (model_type \"" + a.model_type + "\")");
      }
      return a;
    }
    f.fail("architecture \"" + name + "\" is not supported (zc loads " + known(true) + ")");
  }
  if (model_type.empty()) {
    f.fail(
        "names no architecture: expected \"architectures\" (e.g. [\"LlamaForCausalLM\"]) or "
        "\"model_type\"");
  }
  for (const auto& a : kArchitectures) {
    if (model_type == a.model_type) return a;
  }
  f.fail("model_type \"" + model_type + "\" is not supported (zc loads " + known(false) + ")");
}

// transformers' defaults where config.json leaves a field out; they differ by model type.
struct LlamaDefaults {
  int64_t intermediate_size, num_key_value_heads, max_position_embeddings;
};

void read_rope(const Fields& f, LlamaConfig& c) {
  // transformers 5 reads a rope_scaling of a version-4 file in preference to rope_parameters.
  const char* key = f.get("rope_scaling") ? "rope_scaling" : "rope_parameters";
  double theta = f.real("rope_theta", 10000.0);
  double partial = f.real("partial_rotary_factor", 1.0);
  RopeScaling& s = c.rope_scaling;
  if (const Value* params = f.get(key)) {
    if (params->kind != Value::Kind::object) f.fail(key, "must be an object or null");
    const Fields rope(*params, f.origin(), std::string(key) + ".");
    for (const auto& [name, value] : params->object) {
      if (value.kind == Value::Kind::object) {
        rope.fail(name, "holds RoPE parameters per layer type, which Llama does not have");
      }
    }
    const std::string type = rope.string("rope_type", rope.string("type", "default"));
    theta = rope.real("rope_theta", theta);
    partial = rope.real("partial_rotary_factor", partial);
    if (type == "default") {
      s.type = RopeScaling::Type::none;
    } else if (type == "linear" || type == "dynamic") {
      s.type = type == "linear" ? RopeScaling::Type::linear : RopeScaling::Type::dynamic;
      s.factor = rope.required_real("factor", type + " scaling divides by it");
    } else if (type == "llama3") {
      s.type = RopeScaling::Type::llama3;
      const std::string why = "llama3 scaling needs factor, low_freq_factor and high_freq_factor";
      s.factor = rope.required_real("factor", why);
      s.low_freq_factor = rope.required_real("low_freq_factor", why);
      s.high_freq_factor = rope.required_real("high_freq_factor", why);
      s.original_max_position_embeddings =
          rope.integer("original_max_position_embeddings", c.max_position_embeddings);
    } else {
      rope.fail(type == rope.string("type", "") ? "type" : "rope_type",
                "is \"" + type +
                    "\", a RoPE scaling zc's Llama does not compute (it computes default, linear, "
                    "dynamic and llama3)");
    }
  }
  if (partial != 1.0) {
    f.fail("partial_rotary_factor",
           "is " + real_str(partial) + ": Llama rotates the whole head, zc computes only that");
  }
  c.rope_theta = theta;
}

void read_mistral_window(const Fields& f, const LlamaConfig& c) {
  const Value* present = f.object().find("sliding_window");
  // An absent field is transformers' default window of 4096; null is no window.
  const int64_t window = present ? f.integer("sliding_window", -1) : 4096;
  if (window >= 0 && window < c.max_position_embeddings) {
    f.fail("sliding_window", "is " + std::to_string(window) + ", below max_position_embeddings " +
                                 std::to_string(c.max_position_embeddings) +
                                 ": attention over a sliding window is not implemented (a Mistral "
                                 "whose window is null or covers every position computes as "
                                 "Llama and loads)");
  }
}

LlamaConfig read_llama(const Fields& f, bool mistral) {
  const LlamaDefaults d = mistral ? LlamaDefaults{14336, 8, 131072} : LlamaDefaults{11008, 0, 2048};
  LlamaConfig c;
  c.vocab_size = f.integer("vocab_size", 32000);
  c.hidden_size = f.integer("hidden_size", 4096);
  c.intermediate_size = f.integer("intermediate_size", d.intermediate_size);
  c.num_hidden_layers = f.integer("num_hidden_layers", 32);
  c.num_attention_heads = f.integer("num_attention_heads", 32);
  c.num_key_value_heads = f.integer("num_key_value_heads", d.num_key_value_heads);
  c.head_dim = f.integer("head_dim", 0);
  c.rms_norm_eps = f.real("rms_norm_eps", 1e-6);
  c.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  // Mistral's projections have no biases whatever the config says.
  c.attention_bias = !mistral && f.boolean("attention_bias", false);
  c.mlp_bias = !mistral && f.boolean("mlp_bias", false);
  const std::string act = f.string("hidden_act", "silu");
  if (act != "silu") {
    f.fail("hidden_act", "is \"" + act + "\": zc's Llama computes SwiGLU with silu only");
  }
  read_rope(f, c);
  if (mistral) read_mistral_window(f, c);
  try {
    return c.resolved();
  } catch (const Error& e) {
    f.fail(std::string("describes no valid model: ") + e.what());
  }
}

GPTConfig read_gpt2(const Fields& f) {
  GPTConfig c;
  c.vocab_size = f.integer("vocab_size", 50257);
  c.block_size = f.integer("n_positions", 1024);
  c.d_model = f.integer("n_embd", 768);
  c.n_layer = f.integer("n_layer", 12);
  c.n_head = f.integer("n_head", 12);
  c.layer_norm_eps = f.real("layer_norm_epsilon", 1e-5);
  const int64_t inner = f.integer("n_inner", 4 * c.d_model);
  if (c.d_model <= 0 || inner <= 0 || inner % c.d_model != 0) {
    f.fail("n_inner", "is " + std::to_string(inner) +
                          ": zc's GPT needs a positive multiple of n_embd (" +
                          std::to_string(c.d_model) + ")");
  }
  c.mlp_ratio = inner / c.d_model;
  const std::string act = f.string("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    f.fail("activation_function",
           "is \"" + act + "\": zc's GPT computes GELU's tanh approximation (gelu_new) only");
  }
  struct Flag {
    const char* key;
    bool fallback, supported;
    const char* why;
  };
  constexpr Flag kFlags[] = {
      {"scale_attn_weights", true, true, "zc's attention always scales by 1/sqrt(head_dim)"},
      {"scale_attn_by_inverse_layer_idx", false, false, "zc's attention has no per-layer scale"},
      {"add_cross_attention", false, false, "zc's GPT has no cross-attention"},
      {"tie_word_embeddings", true, true, "zc's GPT ties its head to wte"},
  };
  for (const auto& flag : kFlags) {
    const bool value = f.boolean(flag.key, flag.fallback);
    if (value != flag.supported) {
      f.fail(flag.key, std::string("is ") + (value ? "true" : "false") + ": " + flag.why);
    }
  }
  if (c.vocab_size <= 0 || c.block_size <= 0 || c.n_head <= 0 || c.n_layer < 0 ||
      c.d_model % c.n_head != 0) {
    f.fail("describes no valid GPT-2: vocab_size " + std::to_string(c.vocab_size) +
           ", n_positions " + std::to_string(c.block_size) + ", n_layer " +
           std::to_string(c.n_layer) + ", n_head " + std::to_string(c.n_head) + ", n_embd " +
           std::to_string(c.d_model) + " (n_embd must be a multiple of n_head)");
  }
  return c;
}

}  // namespace

PretrainedConfig parse_pretrained_config(std::string_view text, const std::string& origin) {
  Value root;
  try {
    root = json::parse(text);
  } catch (const json::ParseError& e) {
    throw Error(origin + ": malformed JSON at byte " + std::to_string(e.offset) + ": " + e.reason);
  }
  if (root.kind != Value::Kind::object) {
    throw Error(origin + ": expected a JSON object, found " +
                std::string(json::kind_name(root.kind)));
  }
  const Fields f(root, origin);
  const Architecture& arch = find_architecture(f);
  PretrainedConfig out;
  out.family = arch.family;
  out.architecture = arch.architecture;
  if (arch.family == Family::llama) {
    out.llama = read_llama(f, std::string(arch.model_type) == "mistral");
  } else {
    out.gpt = read_gpt2(f);
  }
  return out;
}

}  // namespace zc::models
