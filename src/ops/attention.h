// What the attention ops share: the forward (attention.cpp) and the log-sum-exp and gradients
// its derivative is made of (attention_grad.cpp).
#pragma once

#include "ops/registry.h"

namespace zc::ops {

// s without its last `n` dims: an operand's batch dims.
Shape leading_dims(const Shape& s, size_t n);

// q k^T * scale, with the keys after each query at -inf when causal (query i sees keys 0..i,
// top-left aligned, as torch): the scores softmax turns into the attention weights, for the
// decompositions. q and k are in the compute type `ct`.
Tensor attention_scores(const Tensor& q, const Tensor& k, bool causal, double scale, DType ct);

// t (an eager kernel's input) broadcast to `batch` followed by its own last `n` dims, in dtype
// `ct` and contiguous: one dense block per batch item, as the eager kernels read them.
Tensor attention_operand(const Tensor& t, const Shape& batch, size_t n, DType ct);

}  // namespace zc::ops
