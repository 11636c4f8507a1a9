// A model with two inputs and two outputs, for the tests of many-input modules: gpt-small's
// layers over token ids [B, T] (i64) and a weight per token [B, T] (f32; 0 for padding), giving
// the logits [B, T, V] and the weighted mean of the final hidden states [B, d], an embedding
// of each sequence. Both inputs share the sequence length, so a dynamic length is one symbol
// of two inputs.
#pragma once

#include <memory>
#include <vector>

#include "zc/zc.h"

namespace zc::test {

class PooledGPT : public nn::Module {
 public:
  explicit PooledGPT(const models::GPTConfig& config)
      : gpt(register_module("gpt", models::gpt(config))) {}

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    if (in.size() != 2) throw Error("PooledGPT: expected token ids and weights");
    const Tensor& tokens = in[0];
    const Tensor& weights = in[1];
    const int64_t b = tokens.size(0), t = tokens.size(1);
    Tensor x = (*gpt->wte)(tokens) + gpt->wpe->weight.slice(0, 0, t);
    for (const auto& block : *gpt->blocks) x = (*block)(x);
    Tensor h = (*gpt->ln_f)(x);
    Tensor logits = matmul(h, gpt->wte->weight.t());
    Tensor pooled = sum(h * weights.reshape({b, t, 1}), {1}) / sum(weights, {1}, true);
    return {logits, pooled};
  }

  std::shared_ptr<models::GPT> gpt;
};

// Weights for `tokens`: in (0.5, 1.5), so the mean never divides by zero.
inline Tensor token_weights(const Tensor& tokens) {
  return (rand(tokens.shape()) + 0.5).to(tokens.device());
}

}  // namespace zc::test
