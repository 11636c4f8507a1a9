// zc::models::CausalLM: what every decoder-only language model of zc::models is, whatever its
// architecture (GPT-2, Llama): a module from token ids to next-token logits.
#pragma once

#include <cstdint>

#include "zc/nn.h"

namespace zc::models {

class CausalLM : public nn::Module {
 public:
  using nn::Module::forward;
  // Logits [B, T, vocab_size()] for token ids [B, T] (i64 or i32), in the model's dtype:
  // position t's row scores the token after ids[:, t], from ids[:, 0..t] only. Raises
  // zc::Error for ids of another rank or dtype, or T above max_sequence_length().
  Tensor forward(const Tensor& ids) override = 0;
  virtual int64_t vocab_size() const = 0;
  // The longest sequence forward() takes (its position embeddings or rotary tables end there).
  virtual int64_t max_sequence_length() const = 0;
};

}  // namespace zc::models
