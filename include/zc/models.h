// Language models (GPT-2, the Llama family) as zc::models::CausalLM, from_pretrained for
// transformers checkpoints, and the reference models examples, tests and benchmarks use.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "zc/causal_lm.h"
#include "zc/device.h"
#include "zc/dtype.h"
#include "zc/llama.h"
#include "zc/nn.h"

namespace zc::models {

struct GPTConfig {
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;  // maximum sequence length
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t d_model = 768;
  // nanoGPT's dropout, in training mode: after the embeddings and on each block's two residual
  // branches (the attention's and the MLP's output projections). Not on the attention
  // probabilities: the fused attention op has none.
  double dropout = 0.0;
  double layer_norm_eps = 1e-5;  // every LayerNorm's (transformers' layer_norm_epsilon)
  int64_t mlp_ratio = 4;         // the MLP's width over d_model
};

// GPT-2: token and position embeddings, n_layer TransformerBlocks (causal), a final
// LayerNorm and an LM head tied to the token embedding. forward() takes token ids [B, T]
// (i64) and returns logits [B, T, vocab_size].
class GPT : public CausalLM {
 public:
  // Init::none allocates every weight without drawing it (from_pretrained fills them all).
  explicit GPT(const GPTConfig& config, nn::Init init = nn::Init::random);
  using CausalLM::forward;
  Tensor forward(const Tensor& tokens) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;  // CausalLM's step
  int64_t vocab_size() const override { return config.vocab_size; }
  int64_t max_sequence_length() const override { return config.block_size; }
  void allocate_cache(int64_t batch, int64_t max_length) override;
  int64_t cache_length() const override { return cache_length_; }
  GPTConfig config;
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;

 private:
  int64_t cache_length_ = 0;
};

std::shared_ptr<GPT> gpt(const GPTConfig& config, nn::Init init = nn::Init::random);

struct PretrainedOptions {
  DType dtype = DType::f32;  // the model's; stored weights of any float dtype convert to it
  Device device = Device::cpu();
};

// A transformers checkpoint directory as save_pretrained writes it: config.json, and the
// weights as model.safetensors or model.safetensors.index.json with its shards (F32, BF16 or
// F16). Architectures: LlamaForCausalLM (model_type "llama"; "mistral" too when its sliding
// window never applies) as a Llama, GPT2LMHeadModel ("gpt2") as a GPT. The model comes back
// in eval mode. Raises zc::Error naming the cause: an unknown architecture, a missing file, a
// malformed config.json (the field and what it should be), a setting zc does not implement, a
// tensor missing from the checkpoint or of the wrong shape or dtype.
std::shared_ptr<CausalLM> from_pretrained(const std::string& dir);
std::shared_ptr<CausalLM> from_pretrained(const std::string& dir, const PretrainedOptions& options);

// The benchmarks' small GPT ("gpt-small"): vocabulary 1024, context 128, 4 heads, d_model 256
// and `n_layer` blocks (4 in every published figure). gpt_small_tokens() is its input: a batch
// of 4 random sequences of 128 tokens.
GPTConfig gpt_small_config(int64_t n_layer = 4);
Tensor gpt_small_tokens();

// The regional-compilation recipe's model: one Linear(d, d), then n_layers x
// [Linear(d, d), ReLU, sigmoid, Linear(d, d), ReLU].
class SeedLayer : public nn::Module {
 public:
  explicit SeedLayer(int64_t d = 10);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Linear> linear1, linear2;
  std::shared_ptr<nn::ReLU> relu1, relu2;
};

class SeedModel : public nn::Module {
 public:
  // Wraps each layer as it is built: zc::compiled gives torch.compile's regional recipe (each
  // layer compiled by hand); null keeps the layers plain.
  using LayerWrapper = std::function<std::shared_ptr<nn::Module>(std::shared_ptr<nn::Module>)>;
  explicit SeedModel(int64_t n_layers = 64, int64_t d = 10, const LayerWrapper& wrap = nullptr);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Linear> linear;
  std::shared_ptr<nn::ModuleList> layers;
};

std::shared_ptr<SeedModel> seed_model(int64_t n_layers = 64, int64_t d = 10);

}  // namespace zc::models
