// from_pretrained on bad input: each case a zc::Error whose message names the cause and what
// was expected; and config.json's two spellings (transformers 4 and 5) read alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "models/hf_config.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace {

namespace fs = std::filesystem;
using zc::Tensor;
using zc::models::parse_pretrained_config;
using zc::models::PretrainedConfig;
using zc::models::RopeScaling;
using zc::test::contains;
using zc::test::error_message;

const std::string kFixtures = std::string(ZC_TEST_SOURCE_DIR) + "/data/llm/";

// A writable copy of a fixture, for the test to break.
std::string copy_fixture(const std::string& name) {
  const std::string dir = zc::test::test_dir("pretrained") + "/" + name;
  fs::copy(kFixtures + name, dir, fs::copy_options::recursive);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// config.json with its first `from` replaced by `to`; the test fails if there is none.
void edit_config(const std::string& dir, const std::string& from, const std::string& to) {
  const std::string path = dir + "/config.json";
  std::string text = read_file(path);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  text.replace(at, from.size(), to);
  write_file(path, text);
}

std::string load_error(const std::string& dir) {
  return error_message([&] { zc::models::from_pretrained(dir); });
}

TEST(PretrainedErrors, NotACheckpointDirectory) {
  const std::string missing = zc::test::test_dir("pretrained") + "/nothing-here";
  std::string msg = load_error(missing);
  EXPECT_TRUE(contains(msg, "nothing-here")) << msg;
  EXPECT_TRUE(contains(msg, "not a directory")) << msg;

  const std::string empty = zc::test::test_dir("pretrained");
  msg = load_error(empty);
  EXPECT_TRUE(contains(msg, "no config.json")) << msg;
  EXPECT_TRUE(contains(msg, "save_pretrained")) << msg;
}

TEST(PretrainedErrors, NoWeightsFile) {
  const std::string dir = copy_fixture("llama-gqa");
  fs::remove(dir + "/model.safetensors");
  std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg,
                       "no weights: expected model.safetensors or "
                       "model.safetensors.index.json"))
      << msg;
  write_file(dir + "/pytorch_model.bin", "not read");
  msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "pytorch_model.bin, PyTorch's pickle format")) << msg;
}

TEST(PretrainedErrors, UnknownArchitectureIsNamed) {
  const std::string dir = copy_fixture("llama-gqa");
  edit_config(dir, "\"LlamaForCausalLM\"", "\"Qwen2ForCausalLM\"");
  const std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "architecture \"Qwen2ForCausalLM\" is not supported")) << msg;
  EXPECT_TRUE(contains(msg, "LlamaForCausalLM, MistralForCausalLM, GPT2LMHeadModel")) << msg;
  EXPECT_TRUE(contains(msg, dir + "/config.json")) << msg;
}

TEST(PretrainedErrors, MalformedConfigJson) {
  const std::string dir = copy_fixture("gpt2");
  const std::string text = read_file(dir + "/config.json");
  write_file(dir + "/config.json", text.substr(0, text.size() / 2));
  const std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg, dir + "/config.json: malformed JSON at byte")) << msg;
}

TEST(PretrainedErrors, MissingTensorIsNamed) {
  const std::string dir = copy_fixture("llama-gqa");
  auto tensors = zc::read_safetensors(dir + "/model.safetensors");
  ASSERT_EQ(tensors.erase("model.layers.1.mlp.up_proj.weight"), 1u);
  zc::write_safetensors(tensors, dir + "/model.safetensors");
  const std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg,
                       "tensor \"model.layers.1.mlp.up_proj.weight\" is missing from the "
                       "checkpoint"))
      << msg;
  EXPECT_TRUE(contains(msg, "LlamaForCausalLM")) << msg;
}

TEST(PretrainedErrors, GPT2TensorMissingNamesItsCheckpointName) {
  const std::string dir = copy_fixture("gpt2");
  auto tensors = zc::read_safetensors(dir + "/model.safetensors");
  ASSERT_EQ(tensors.erase("transformer.h.1.attn.c_proj.weight"), 1u);
  zc::write_safetensors(tensors, dir + "/model.safetensors");
  const std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "tensor \"transformer.h.1.attn.c_proj.weight\" is missing")) << msg;
}

// GPT-2 checkpoints converted from OpenAI's have no "transformer." prefix.
TEST(PretrainedErrors, GPT2WithoutPrefixLoads) {
  const std::string dir = copy_fixture("gpt2");
  std::map<std::string, Tensor> renamed;
  for (auto& [name, t] : zc::read_safetensors(dir + "/model.safetensors")) {
    renamed.emplace(name.rfind("transformer.", 0) == 0 ? name.substr(12) : name, t);
  }
  zc::write_safetensors(renamed, dir + "/model.safetensors");
  auto model = zc::models::from_pretrained(dir);
  auto reference = zc::models::from_pretrained(kFixtures + "gpt2");
  const Tensor ids = zc::from_values<int64_t>({1, 2, 3}, {1, 3});
  EXPECT_TRUE(zc::allclose((*model)(ids), (*reference)(ids), 0, 0));
}

TEST(PretrainedErrors, WrongShapeNamesTheTensorGotAndExpected) {
  const std::string dir = copy_fixture("llama-gqa");
  edit_config(dir, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4");
  const std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "tensor \"model.layers.0.self_attn.k_proj.weight\"")) << msg;
  EXPECT_TRUE(contains(msg, "has shape [32,64], expected [64,64]")) << msg;
}

TEST(PretrainedErrors, GPT2ConvWeightOfTheWrongOrientation) {
  const std::string dir = copy_fixture("gpt2");
  auto tensors = zc::read_safetensors(dir + "/model.safetensors");
  Tensor& w = tensors.at("transformer.h.0.mlp.c_fc.weight");  // Conv1D: [in 64, out 256]
  w = w.t().contiguous();
  zc::write_safetensors(tensors, dir + "/model.safetensors");
  const std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "\"transformer.h.0.mlp.c_fc.weight\"")) << msg;
  EXPECT_TRUE(contains(msg, "has shape [256,64], expected [64,256]")) << msg;
}

TEST(PretrainedErrors, UnsupportedDtypes) {
  const std::string dir = copy_fixture("llama-gqa");
  auto tensors = zc::read_safetensors(dir + "/model.safetensors");
  Tensor& norm = tensors.at("model.norm.weight");
  norm = norm.to(zc::DType::i32);
  zc::write_safetensors(tensors, dir + "/model.safetensors");
  std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "tensor \"model.norm.weight\"")) << msg;
  EXPECT_TRUE(contains(msg, "stored as i32; weights must be F32, BF16, F16 or F64")) << msg;

  // An 8-bit float checkpoint: the reader names the dtype it does not know.
  const std::string header =
      R"({"model.norm.weight":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_file(dir + "/model.safetensors", bytes + header + "xx");
  msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "dtype \"F8_E4M3\" is not supported")) << msg;
}

TEST(PretrainedErrors, TensorTheModelHasNoPlaceFor) {
  const std::string dir = copy_fixture("llama-gqa");
  auto tensors = zc::read_safetensors(dir + "/model.safetensors");
  tensors.emplace("model.layers.0.self_attn.q_proj.bias", zc::zeros({64}));
  zc::write_safetensors(tensors, dir + "/model.safetensors");
  const std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg,
                       "holds tensor \"model.layers.0.self_attn.q_proj.bias\", which the "
                       "model has no place for"))
      << msg;
}

// What a checkpoint may hold beside the model's parameters: old transformers' rotary
// frequencies, and a tied head's copy.
TEST(PretrainedErrors, TensorsComputedOrTiedAreIgnored) {
  const std::string dir = copy_fixture("llama3-sharded");  // tied
  const std::string shard = dir + "/model-00001-of-00002.safetensors";
  auto tensors = zc::read_safetensors(shard);
  tensors.emplace("model.layers.0.self_attn.rotary_emb.inv_freq", zc::ones({12}));
  tensors.emplace("lm_head.weight", zc::zeros({256, 64}));
  zc::write_safetensors(tensors, shard);
  auto model = zc::models::from_pretrained(dir);
  auto reference = zc::models::from_pretrained(kFixtures + "llama3-sharded");
  const Tensor ids = zc::from_values<int64_t>({1, 2, 3}, {1, 3});
  EXPECT_TRUE(zc::allclose((*model)(ids), (*reference)(ids), 0, 0));
}

TEST(PretrainedErrors, ShardedIndexProblems) {
  const std::string dir = copy_fixture("llama3-sharded");
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string good = read_file(index);

  fs::rename(dir + "/model-00002-of-00002.safetensors", dir + "/elsewhere.safetensors");
  std::string msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "shard \"model-00002-of-00002.safetensors\" named by")) << msg;
  EXPECT_TRUE(contains(msg, "is missing")) << msg;
  fs::rename(dir + "/elsewhere.safetensors", dir + "/model-00002-of-00002.safetensors");

  write_file(index, good.substr(0, 40));
  msg = load_error(dir);
  EXPECT_TRUE(contains(msg, index + ": malformed JSON at byte")) << msg;

  write_file(index, R"({"metadata": {}})");
  msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "\"weight_map\"")) << msg;

  write_file(index, R"({"weight_map": {"model.norm.weight": "../model.safetensors"}})");
  msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "not a file name beside the index")) << msg;

  // An index naming only one of the shards: the other's tensors are missing.
  write_file(index, R"({"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}})");
  msg = load_error(dir);
  EXPECT_TRUE(contains(msg, "tensors \"model.embed_tokens.weight\", ")) << msg;
  EXPECT_TRUE(contains(msg, "are missing from the checkpoint (the 1 shard(s) of " + index)) << msg;
}

TEST(PretrainedErrors, OptionsDtypeMustBeFloating) {
  const std::string msg = error_message(
      [] { zc::models::from_pretrained(kFixtures + "gpt2", {.dtype = zc::DType::i64}); });
  EXPECT_TRUE(contains(msg, "options.dtype must be a floating-point dtype, got i64")) << msg;
}

PretrainedConfig parse(const std::string& text) {
  return parse_pretrained_config(text, "test/config.json");
}

std::string parse_error(const std::string& text) {
  return error_message([&] { parse(text); });
}

const std::string kLlama =
    R"("architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4, )"
    R"("intermediate_size": 128, "vocab_size": 256, "num_hidden_layers": 2)";

TEST(PretrainedConfig, RefusedFieldsAreNamed) {
  struct Case {
    std::string text;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"[1]", {"test/config.json: expected a JSON object, found array"}},
      {"{}", {"names no architecture", "\"architectures\"", "\"model_type\""}},
      {R"({"model_type": "qwen2"})",
       {"model_type \"qwen2\" is not supported", "llama, mistral, gpt2"}},
      {R"({"architectures": "LlamaForCausalLM"})", {"\"architectures\" must be a list"}},
      {R"({"architectures": ["LlamaForCausalLM"], "model_type": "gpt2"})",
       {"\"model_type\" is \"gpt2\", but architectures names LlamaForCausalLM"}},
      {"{" + kLlama + R"(, "hidden_size": "64"})", {"duplicate key"}},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "64"})",
       {"\"hidden_size\" must be an integer, found string"}},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64.0})",
       {"\"hidden_size\" must be an integer, found number"}},
      {"{" + kLlama + R"(, "rms_norm_eps": "1e-5"})", {"\"rms_norm_eps\" must be a number"}},
      {"{" + kLlama + R"(, "tie_word_embeddings": 1})",
       {"\"tie_word_embeddings\" must be true or false, found integer"}},
      {"{" + kLlama + R"(, "hidden_act": "gelu"})", {"\"hidden_act\" is \"gelu\"", "silu"}},
      {"{" + kLlama + R"(, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}})",
       {"\"rope_parameters.rope_type\" is \"yarn\"", "default, linear, dynamic and llama3"}},
      {"{" + kLlama + R"(, "rope_scaling": {"type": "longrope"}})",
       {"\"rope_scaling.type\" is \"longrope\""}},
      {"{" + kLlama + R"(, "rope_scaling": {"type": "linear"}})",
       {"\"rope_scaling.factor\" is missing"}},
      {"{" + kLlama + R"(, "rope_parameters": {"rope_type": "llama3", "factor": 8.0,
          "high_freq_factor": 4.0}})",
       {"\"rope_parameters.low_freq_factor\" is missing"}},
      {"{" + kLlama + R"(, "rope_parameters": "default"})",
       {"\"rope_parameters\" must be an object or null"}},
      {"{" + kLlama + R"(, "rope_parameters": {"full_attention": {"rope_type": "default"}}})",
       {"\"rope_parameters.full_attention\" holds RoPE parameters per layer type"}},
      {"{" + kLlama + R"(, "partial_rotary_factor": 0.5})",
       {"\"partial_rotary_factor\" is 0.5", "whole head"}},
      {"{" + kLlama + R"(, "num_key_value_heads": 3})",
       {"describes no valid model", "not a multiple of num_key_value_heads 3"}},
      {R"({"architectures": ["MistralForCausalLM"], "sliding_window": 4096,
          "max_position_embeddings": 32768})",
       {"\"sliding_window\" is 4096, below max_position_embeddings 32768",
        "sliding window is not implemented"}},
      // transformers' Mistral default window applies when the field is left out.
      {R"({"architectures": ["MistralForCausalLM"]})", {"\"sliding_window\" is 4096"}},
      {R"({"architectures": ["GPT2LMHeadModel"], "add_cross_attention": true})",
       {"\"add_cross_attention\" is true", "no cross-attention"}},
      {R"({"architectures": ["GPT2LMHeadModel"], "scale_attn_by_inverse_layer_idx": true})",
       {"\"scale_attn_by_inverse_layer_idx\" is true"}},
      {R"({"architectures": ["GPT2LMHeadModel"], "tie_word_embeddings": false})",
       {"\"tie_word_embeddings\" is false"}},
      {R"({"architectures": ["GPT2LMHeadModel"], "activation_function": "relu"})",
       {"\"activation_function\" is \"relu\"", "gelu_new"}},
      {R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_inner": 100})",
       {"\"n_inner\" is 100", "multiple of n_embd (64)"}},
      {R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_head": 5})",
       {"describes no valid GPT-2", "n_head 5"}},
  };
  for (const auto& c : cases) {
    const std::string msg = parse_error(c.text);
    EXPECT_TRUE(contains(msg, "test/config.json")) << c.text << " -> " << msg;
    for (const auto& part : c.expected) {
      EXPECT_TRUE(contains(msg, part)) << c.text << " -> " << msg;
    }
  }
}

TEST(PretrainedConfig, BothSpellingsOfRope) {
  struct Case {
    std::string fields;
    RopeScaling::Type type;
    double theta, factor;
  };
  const std::vector<Case> cases = {
      // Nothing said: default RoPE at 10000.
      {"", RopeScaling::Type::none, 10000.0, 1.0},
      // transformers 5.
      {R"("rope_parameters": {"rope_type": "default", "rope_theta": 500000.0})",
       RopeScaling::Type::none, 500000.0, 1.0},
      {R"("rope_parameters": {"rope_type": "linear", "rope_theta": 20000, "factor": 2})",
       RopeScaling::Type::linear, 20000.0, 2.0},
      // transformers 4: theta at the top, rope_scaling null or with "type" or "rope_type".
      {R"("rope_theta": 1000000.0, "rope_scaling": null)", RopeScaling::Type::none, 1e6, 1.0},
      {R"("rope_theta": 1000.0, "rope_scaling": {"type": "dynamic", "factor": 3.0})",
       RopeScaling::Type::dynamic, 1000.0, 3.0},
      {R"("rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192})",
       RopeScaling::Type::llama3, 500000.0, 32.0},
      // A theta inside the parameters wins over one at the top; rope_scaling over
      // rope_parameters, as transformers 5 reads them.
      {R"("rope_theta": 1.0, "rope_parameters": {"rope_type": "default", "rope_theta": 7.0})",
       RopeScaling::Type::none, 7.0, 1.0},
      {R"("rope_scaling": {"type": "linear", "factor": 4.0},
          "rope_parameters": {"rope_type": "default"})",
       RopeScaling::Type::linear, 10000.0, 4.0},
  };
  for (const auto& c : cases) {
    const std::string text = "{" + kLlama + (c.fields.empty() ? "" : ", " + c.fields) + "}";
    const PretrainedConfig config = parse(text);
    ASSERT_EQ(config.family, PretrainedConfig::Family::llama) << text;
    EXPECT_EQ(config.llama.rope_scaling.type, c.type) << text;
    EXPECT_EQ(config.llama.rope_theta, c.theta) << text;
    EXPECT_EQ(config.llama.rope_scaling.factor, c.factor) << text;
  }
  const PretrainedConfig llama3 = parse("{" + kLlama + R"(, "max_position_embeddings": 300,
      "rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0,
      "high_freq_factor": 4.0}})");
  EXPECT_EQ(llama3.llama.rope_scaling.low_freq_factor, 2.0);
  // Left out: the model's max_position_embeddings, as transformers fills it in.
  EXPECT_EQ(llama3.llama.rope_scaling.original_max_position_embeddings, 300);
}

TEST(PretrainedConfig, ModelTypeAloneAndDefaults) {
  const PretrainedConfig llama = parse(R"({"model_type": "llama"})");
  EXPECT_EQ(llama.family, PretrainedConfig::Family::llama);
  EXPECT_EQ(llama.architecture, "LlamaForCausalLM");
  // transformers' LlamaConfig defaults, resolved.
  EXPECT_EQ(llama.llama.hidden_size, 4096);
  EXPECT_EQ(llama.llama.num_key_value_heads, 32);
  EXPECT_EQ(llama.llama.head_dim, 128);
  EXPECT_EQ(llama.llama.rms_norm_eps, 1e-6);

  // Mistral's defaults differ (grouped heads, a long context); a null window loads.
  const PretrainedConfig mistral =
      parse(R"({"architectures": ["MistralForCausalLM"], "sliding_window": null,
                "attention_bias": true})");
  EXPECT_EQ(mistral.family, PretrainedConfig::Family::llama);
  EXPECT_EQ(mistral.llama.num_key_value_heads, 8);
  EXPECT_EQ(mistral.llama.intermediate_size, 14336);
  EXPECT_FALSE(mistral.llama.attention_bias);  // Mistral's projections have none
  // A window covering every position never applies.
  EXPECT_NO_THROW(parse(R"({"model_type": "mistral", "sliding_window": 131072})"));

  const PretrainedConfig gpt2 = parse(R"({"model_type": "gpt2", "n_inner": 1536,
      "layer_norm_epsilon": 1e-6, "activation_function": "gelu_pytorch_tanh"})");
  EXPECT_EQ(gpt2.family, PretrainedConfig::Family::gpt2);
  EXPECT_EQ(gpt2.gpt.vocab_size, 50257);
  EXPECT_EQ(gpt2.gpt.block_size, 1024);
  EXPECT_EQ(gpt2.gpt.mlp_ratio, 2);
  EXPECT_EQ(gpt2.gpt.layer_norm_eps, 1e-6);
}

// Every prefix of a real config.json either parses or raises zc::Error: nothing else escapes.
TEST(PretrainedConfig, TruncatedConfigsRaiseOnlyZcError) {
  for (const char* fixture : {"llama3-sharded", "gpt2", "llama-v4-linear"}) {
    const std::string text = read_file(kFixtures + fixture + "/config.json");
    ASSERT_FALSE(text.empty());
    EXPECT_NO_THROW(parse(text)) << fixture;
    for (size_t len = 0; len < text.size(); ++len) {
      try {
        parse(text.substr(0, len));
      } catch (const zc::Error&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << fixture << " cut at " << len << ": " << e.what();
      }
    }
  }
}

}  // namespace
