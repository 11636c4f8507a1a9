// from_pretrained: a transformers checkpoint directory to the zc model computing the same
// function. config.json chooses and configures the model (hf_config), the model says which
// checkpoint name fills each of its parameters (below), and checkpoint loads them.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/hf_config.h"
#include "zc/models.h"

namespace zc::models {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Llama's parameters carry transformers' names already. Its rotary tables are buffers computed
// from the config, not loaded.
std::vector<WeightSource> llama_sources(const Llama& model) {
  std::vector<WeightSource> out;
  for (auto& [name, tensor] : model.named_parameters()) out.push_back({{name}, tensor, false});
  return out;
}

// Stored tensors a Llama checkpoint may hold that zc computes instead: a tied head's copy of
// the embedding, and the inverse frequencies older transformers saved per layer.
bool llama_ignores(const Llama& model, const std::string& name) {
  return (model.config.tie_word_embeddings && name == "lm_head.weight") ||
         ends_with(name, ".rotary_emb.inv_freq");
}

// transformers' GPT2LMHeadModel names, under "transformer." (or without it, as the original
// OpenAI checkpoints were converted), for zc's GPT parameter names. Conv1D stores its weight
// as [in, out], the transpose of a Linear's.
std::vector<WeightSource> gpt2_sources(const GPT& model) {
  struct Rename {
    const char* zc;
    const char* hf;
    bool transposed;
  };
  constexpr Rename kBlock[] = {
      {"ln1.weight", "ln_1.weight", false},
      {"ln1.bias", "ln_1.bias", false},
      {"attn.in_proj.weight", "attn.c_attn.weight", true},
      {"attn.in_proj.bias", "attn.c_attn.bias", false},
      {"attn.out_proj.weight", "attn.c_proj.weight", true},
      {"attn.out_proj.bias", "attn.c_proj.bias", false},
      {"ln2.weight", "ln_2.weight", false},
      {"ln2.bias", "ln_2.bias", false},
      {"fc.weight", "mlp.c_fc.weight", true},
      {"fc.bias", "mlp.c_fc.bias", false},
      {"proj.weight", "mlp.c_proj.weight", true},
      {"proj.bias", "mlp.c_proj.bias", false},
  };
  auto source = [](const std::string& hf, const Tensor& target, bool transposed) {
    return WeightSource{{"transformer." + hf, hf}, target, transposed};
  };
  std::vector<WeightSource> out;
  for (auto& [name, tensor] : model.named_parameters()) {
    if (name.rfind("blocks.", 0) != 0) {
      // wte, wpe and ln_f have the same names.
      out.push_back(source(name, tensor, false));
      continue;
    }
    const size_t dot = name.find('.', 7);
    const std::string layer = name.substr(7, dot - 7), rest = name.substr(dot + 1);
    bool renamed = false;
    for (const auto& r : kBlock) {
      if (rest != r.zc) continue;
      out.push_back(source("h." + layer + "." + r.hf, tensor, r.transposed));
      renamed = true;
    }
    if (!renamed) throw Error("zc::models::from_pretrained: internal: no GPT-2 name for " + name);
  }
  return out;
}

// The causal masks older transformers saved as buffers, and the tied head's copy.
bool gpt2_ignores(const std::string& name) {
  return name == "lm_head.weight" || ends_with(name, ".attn.bias") ||
         ends_with(name, ".attn.masked_bias");
}

}  // namespace

std::shared_ptr<CausalLM> from_pretrained(const std::string& dir) {
  return from_pretrained(dir, PretrainedOptions{});
}

std::shared_ptr<CausalLM> from_pretrained(const std::string& dir,
                                          const PretrainedOptions& options) {
  const std::string who = "zc::models::from_pretrained('" + dir + "')";
  if (!is_floating(options.dtype)) {
    throw Error(who + ": options.dtype must be a floating-point dtype, got " +
                std::string(dtype_name(options.dtype)));
  }
  if (!std::filesystem::is_directory(dir)) {
    throw Error(who +
                ": not a directory (expected a checkpoint directory as transformers' "
                "save_pretrained writes it)");
  }
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::is_regular_file(config_path)) {
    throw Error(who +
                ": no config.json (expected a checkpoint directory as transformers' "
                "save_pretrained writes it)");
  }
  const PretrainedConfig config =
      parse_pretrained_config(read_text_file(config_path, who), config_path);
  const CheckpointFiles files = checkpoint_files(dir);

  std::shared_ptr<CausalLM> model;
  std::vector<WeightSource> sources;
  std::function<bool(const std::string&)> ignored;
  if (config.family == PretrainedConfig::Family::llama) {
    // Every parameter comes from the checkpoint, or the load fails: drawing random values
    // first would cost longer than the load (tens of seconds for 1B weights).
    auto llama_model = std::make_shared<Llama>(config.llama, nn::Init::none);
    sources = llama_sources(*llama_model);
    ignored = [m = llama_model.get()](const std::string& name) { return llama_ignores(*m, name); };
    model = llama_model;
  } else {
    auto gpt_model = gpt(config.gpt, nn::Init::none);  // as the Llama's, every weight is read
    sources = gpt2_sources(*gpt_model);
    ignored = gpt2_ignores;
    model = gpt_model;
  }
  // Each stored tensor converts once, straight to the model's dtype; to() then converts what
  // the checkpoint does not hold (the rotary tables).
  load_checkpoint(files, sources, ignored, options.dtype, who + " (" + config.architecture + ")");
  model->to(options.dtype);
  if (options.device != Device::cpu()) model->to(options.device);
  model->eval();
  return model;
}

}  // namespace zc::models
