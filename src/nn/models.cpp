#include <cmath>
#include <memory>
#include <string>

#include "nn/kv_cache.h"
#include "tensor/assign.h"
#include "zc/autograd.h"
#include "zc/factories.h"
#include "zc/models.h"
#include "zc/ops.h"

namespace zc::models {

namespace {

void check_config(const GPTConfig& c) {
  auto positive = [](const char* name, int64_t v) {
    if (v <= 0) {
      throw Error(std::string("zc::models::GPT: config.") + name + " must be positive, got " +
                  std::to_string(v));
    }
  };
  positive("vocab_size", c.vocab_size);
  positive("block_size", c.block_size);
  positive("n_head", c.n_head);
  positive("d_model", c.d_model);
  positive("mlp_ratio", c.mlp_ratio);
  if (c.n_layer < 0) {
    throw Error("zc::models::GPT: config.n_layer must be non-negative, got " +
                std::to_string(c.n_layer));
  }
  if (!(c.dropout >= 0 && c.dropout < 1)) {
    throw Error("zc::models::GPT: config.dropout must be in [0, 1), got " +
                std::to_string(c.dropout));
  }
  if (!(c.layer_norm_eps >= 0) || !std::isfinite(c.layer_norm_eps)) {
    throw Error("zc::models::GPT: config.layer_norm_eps must be finite and non-negative, got " +
                std::to_string(c.layer_norm_eps));
  }
  if (c.d_model % c.n_head != 0) {
    throw Error("zc::models::GPT: config.d_model " + std::to_string(c.d_model) +
                " is not divisible by config.n_head " + std::to_string(c.n_head));
  }
}

}  // namespace

GPT::GPT(const GPTConfig& config, nn::Init init) : config(config) {
  check_config(config);
  wte = register_module("wte",
                        std::make_shared<nn::Embedding>(config.vocab_size, config.d_model, init));
  wpe = register_module("wpe",
                        std::make_shared<nn::Embedding>(config.block_size, config.d_model, init));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks->push_back(std::make_shared<nn::TransformerBlock>(
        config.d_model, config.n_head,
        /*causal=*/true, config.mlp_ratio, config.dropout, config.layer_norm_eps, init));
  }
  ln_f = register_module("ln_f",
                         std::make_shared<nn::LayerNorm>(config.d_model, config.layer_norm_eps));
  // GPT-2 draws its embeddings with std 0.02, not nn::Embedding's 1: the LM head is tied to
  // wte, so unit-variance rows would start the logits at a scale of sqrt(d_model) and the loss
  // far above log(vocab_size).
  if (init == nn::Init::none) return;
  NoGradGuard no_grad;
  for (const Tensor& table : {wte->weight, wpe->weight}) assign_values(table, table * 0.02);
}

Tensor GPT::forward(const Tensor& tokens) {
  if (tokens.dim() != 2 || !is_integral(tokens.dtype())) {
    throw Error("zc::models::GPT: expected integer token ids of shape [B, T], got " +
                std::string(dtype_name(tokens.dtype())) + " " + shape_str(tokens.shape()));
  }
  const int64_t seq = tokens.size(1);
  if (seq > config.block_size) {
    throw Error("zc::models::GPT: sequence length " + std::to_string(seq) + " exceeds block_size " +
                std::to_string(config.block_size));
  }
  // Positions 0..seq-1 are the first seq rows of the position table: a view of the parameter,
  // so the traced graph holds no arange(seq) constant whose values change with the length.
  Tensor x = (*wte)(tokens) + wpe->weight.slice(0, 0, seq);
  if (config.dropout > 0 && is_training()) x = dropout(x, config.dropout);
  for (const auto& block : *blocks) x = (*block)(x);
  // The LM head shares the token embedding's weights (GPT-2's weight tying).
  return matmul((*ln_f)(x), wte->weight.t());
}

std::vector<Tensor> GPT::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  if (inputs.size() != 2 && inputs.size() != 3) {
    throw Error(
        "zc::models::GPT: expected {ids}, {ids, positions} or {ids, positions, "
        "attention_mask}, got " +
        std::to_string(inputs.size()) + " tensors");
  }
  const Tensor &ids = inputs[0], &positions = inputs[1];
  if (cache_length_ == 0) {
    throw Error(
        "zc::models::GPT: a step at given positions needs the KV cache: call "
        "allocate_cache(batch, max_length) first");
  }
  if (ids.dim() != 2 || !is_integral(ids.dtype()) || positions.dim() != 1 ||
      positions.size(0) != ids.size(1) || !is_integral(positions.dtype())) {
    throw Error("zc::models::GPT: expected integer ids [B, T] and positions [T], got " +
                shape_str(ids.shape()) + " and " + shape_str(positions.shape()));
  }
  const Tensor* mask = inputs.size() == 3 ? &inputs[2] : nullptr;
  nn::check_cached_step("zc::models::GPT", ids, positions, mask, cache_length_);
  std::vector<Tensor> step{Tensor(), positions};
  // Each token's row of the position table: its position in its own sequence.
  Tensor rows = positions;
  if (mask) {
    rows = nn::positions_in_sequence(positions, *mask);
    step.push_back(*mask);
  }
  step[0] = (*wte)(ids) + embedding(wpe->weight, rows);
  for (const auto& block : *blocks) step[0] = (*block)(step)[0];
  return {matmul((*ln_f)(step[0]), wte->weight.t())};
}

void GPT::allocate_cache(int64_t batch, int64_t max_length) {
  if (batch <= 0 || max_length <= 0) {
    throw Error("zc::models::GPT::allocate_cache: expected a positive batch and length, got " +
                std::to_string(batch) + " and " + std::to_string(max_length));
  }
  if (max_length > config.block_size) {
    throw Error("zc::models::GPT::allocate_cache: " + std::to_string(max_length) +
                " positions exceed block_size " + std::to_string(config.block_size));
  }
  for (const auto& block : *blocks) {
    std::dynamic_pointer_cast<nn::TransformerBlock>(block)->attn->allocate_cache(batch, max_length);
  }
  cache_length_ = max_length;
}

std::shared_ptr<GPT> gpt(const GPTConfig& config, nn::Init init) {
  return std::make_shared<GPT>(config, init);
}

GPTConfig gpt_small_config(int64_t n_layer) {
  return {.vocab_size = 1024, .block_size = 128, .n_layer = n_layer, .n_head = 4, .d_model = 256};
}

Tensor gpt_small_tokens() {
  return randint(0, 1024, {4, 128});
}

SeedLayer::SeedLayer(int64_t d) {
  linear1 = register_module("linear1", std::make_shared<nn::Linear>(d, d));
  relu1 = register_module("relu1", std::make_shared<nn::ReLU>());
  linear2 = register_module("linear2", std::make_shared<nn::Linear>(d, d));
  relu2 = register_module("relu2", std::make_shared<nn::ReLU>());
}

Tensor SeedLayer::forward(const Tensor& x) {
  return (*relu2)((*linear2)(sigmoid((*relu1)((*linear1)(x)))));
}

SeedModel::SeedModel(int64_t n_layers, int64_t d, const LayerWrapper& wrap) {
  if (n_layers < 0) {
    throw Error("zc::models::SeedModel: n_layers must be non-negative, got " +
                std::to_string(n_layers));
  }
  linear = register_module("linear", std::make_shared<nn::Linear>(d, d));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < n_layers; ++i) {
    std::shared_ptr<nn::Module> layer = std::make_shared<SeedLayer>(d);
    layers->push_back(wrap ? wrap(std::move(layer)) : std::move(layer));
  }
}

Tensor SeedModel::forward(const Tensor& x) {
  Tensor y = (*linear)(x);
  for (const auto& layer : *layers) y = (*layer)(y);
  return y;
}

std::shared_ptr<SeedModel> seed_model(int64_t n_layers, int64_t d) {
  return std::make_shared<SeedModel>(n_layers, d);
}

}  // namespace zc::models
