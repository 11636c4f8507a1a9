// What the cached steps of nn::MultiheadAttention / models::GPT and models::LlamaAttention /
// models::Llama share: the cache's buffers, the step's checks, and positions under left padding.
#pragma once

#include <string>

#include "zc/nn.h"

namespace zc::nn {

// Makes `k_cache` and `v_cache` zeros of `shape`, `dtype` and `device` (the projection's that
// writes them: Linear::dtype(), an int8 layer's activations' dtype): registered
// buffers of `module` ("k_cache", "v_cache") at the first call; kept as they are when they
// already have that shape, dtype and device (a step reads only positions it or an earlier step
// of its generation wrote); otherwise the registered handles keep their identity (compiled
// graphs bind them), take the new contents, and compiled modules see the module changed.
void allocate_kv_cache(Module& module, Tensor& k_cache, Tensor& v_cache, const Shape& shape,
                       DType dtype, Device device);

// A step's checks (`who` names the model in errors): a mask, when given, is [B, cache_length]
// for ids [B, T]; eagerly (positions not traced: reading them would stop a trace), every
// position is inside the cache. A compiled step's positions are the caller's to check
// (zc::generate does).
void check_cached_step(const std::string& who, const Tensor& ids, const Tensor& positions,
                       const Tensor* mask, int64_t cache_length);

// Each token's own position [B, T] (i64) for cache positions `positions` [T] under the left
// padding of `mask` [B, L] (1 a token, 0 padding): a sequence's token at cache position p is
// its (p - padding)-th, as transformers derives position ids from the mask; padding positions
// take 0 (they are never attended to). Computed in f32, exact below 2^24.
Tensor positions_in_sequence(const Tensor& positions, const Tensor& mask);

}  // namespace zc::nn
