// zc::generate: token generation with a CausalLM and its KV cache (docs/generation.md).
//
//   auto lm = zc::models::from_pretrained("TinyLlama-1.1B");
//   zc::GenerateResult r = zc::generate(lm, prompt_ids, {.max_new_tokens = 64});
//   r.tokens;            // [B, 64] i64: the new tokens
//   r.tokens_per_s();    // decode speed
//
// The prompt runs once (the prefill), writing every layer's keys and values into the cache;
// then one step per token, each a call of the same compiled graph with the token's position as
// a tensor input, so a generation compiles two graphs whatever its lengths (and a warm process
// none).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "zc/causal_lm.h"
#include "zc/compile.h"

namespace zc {

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  // 0: greedy (each step takes the most likely token). Above 0, the logits are divided by it,
  // top_k (0: every token) and top_p (1: every token; else the most likely tokens whose
  // probabilities reach it) keep the candidates, and one is drawn.
  double temperature = 0.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  // A sequence that chose this token has ended: its later tokens are this token again, and the
  // generation stops when every sequence has ended.
  std::optional<int64_t> eos_token_id;
  // The draws' generator (temperature above 0): one seed, one generation.
  uint64_t seed = 0;
  // Called after each step with its index and the tokens chosen [B] (i64, on the CPU); returning
  // false ends the generation there (the step's tokens are kept).
  std::function<bool(int64_t step, const Tensor& tokens)> on_token;
  // The prefill and the decode step compiled with compile_options (false: the model eagerly).
  bool compile = true;
  CompileOptions compile_options;
  // The KV cache's positions; 0: the prompt's length plus max_new_tokens.
  int64_t cache_length = 0;
};

struct GenerateResult {
  Tensor tokens;      // [B, steps] i64 on the CPU: the tokens chosen, in order
  int64_t steps = 0;  // tokens chosen per sequence
  // Milliseconds from the call: the prompt's logits, the first token chosen, then the rest of
  // the steps.
  double prefill_ms = 0, first_token_ms = 0, decode_ms = 0;
  // Tokens per second per sequence over the steps after the first (the decode rate); 0 when
  // there was at most one step.
  double tokens_per_s() const;
};

// Generates up to options.max_new_tokens tokens after `prompt` [B, T] (integer ids; every row
// a whole prompt of length T) with the model's KV cache, which it allocates for B sequences.
// Raises zc::Error for a prompt of another rank or dtype or an empty one, options out of range,
// a prompt and new tokens longer than the cache or the model's positions, and a model without
// a cache path.
GenerateResult generate(const std::shared_ptr<models::CausalLM>& model, const Tensor& prompt,
                        const GenerateOptions& options = {});
// Prompts of several lengths in one batch, left-padded as transformers' tokenizers pad for
// generation: `attention_mask` [B, T] is 1 on a prompt's tokens and 0 on the padding before
// them (whatever ids the padding holds). Each sequence's tokens are what it alone would get.
// Raises zc::Error for a mask of another shape, values other than 0 and 1, padding after a
// token (right padding), or a row of padding alone.
GenerateResult generate(const std::shared_ptr<models::CausalLM>& model, const Tensor& prompt,
                        const Tensor& attention_mask, const GenerateOptions& options = {});

}  // namespace zc
