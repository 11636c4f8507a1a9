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

  // The KV cache (docs/generation.md): each attention layer's keys and values for `batch`
  // sequences of up to `max_length` positions, registered buffers in the model's dtype and on
  // its device. Allocating again with other sizes replaces them; with the same, keeps them (a
  // step reads only positions it or an earlier step of its generation wrote). The default
  // raises zc::Error: a model without a cache path.
  virtual void allocate_cache(int64_t batch, int64_t max_length);
  // The positions the cache holds (0 before allocate_cache).
  virtual int64_t cache_length() const { return 0; }
  // A step with the cache: forward({ids [B, T], positions [T] i64}) returns {logits [B, T,
  // vocab]} for tokens at those positions (consecutive, ascending), writing their keys and
  // values into the cache there and attending to the cache's positions up to each one; what
  // the cache holds beyond them is never read. positions is a tensor (on the model's device) so
  // that one compiled graph serves every decode step. forward({ids, positions, attention_mask})
  // takes left-padded sequences: attention_mask [B, cache length] is 1 where a sequence holds
  // a token and 0 on its padding (its first positions); padding is never attended to, and a
  // sequence's tokens are rotated from their own first one. Raises zc::Error without a cache,
  // for ids of another batch size, a mask of another shape, or (eagerly) for a position
  // outside the cache.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

}  // namespace zc::models
