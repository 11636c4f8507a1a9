// The ops attention's derivative is made of (src/ops/attention_grad.cpp), as the tests that
// check them call them: attention_lse, and attention_grad for each gradient it computes.
#pragma once

#include <vector>

#include "ops/attrs.h"
#include "ops/dispatch.h"
#include "zc/tensor.h"

namespace zc::test {

inline constexpr ops::AttentionWrt kEveryWrt[] = {ops::AttentionWrt::q, ops::AttentionWrt::k,
                                                  ops::AttentionWrt::v, ops::AttentionWrt::kv};

inline Tensor lse_op(const Tensor& q, const Tensor& k, bool causal, double scale) {
  return ops::call1(ops::OpId::attention_lse, {q, k}, ops::AttentionAttrs{causal, scale});
}

// `in` is q, k, v, g, lse, delta.
inline Tensor grad_op(const std::vector<Tensor>& in, bool causal, double scale,
                      ops::AttentionWrt wrt) {
  return ops::call1(ops::OpId::attention_grad, in, ops::AttentionGradAttrs{causal, scale, wrt});
}

}  // namespace zc::test
