// One scaled-dot-product-attention case of the attention tests (eager composite, CPU kernel,
// CUDA kernels): the operands' shapes, causal or not, and the scale (default 1/sqrt(d)).
#pragma once

#include <optional>

#include "zc/tensor.h"

namespace zc::test {

struct AttentionCase {
  Shape q, k, v;
  bool causal;
  std::optional<double> scale;
};

}  // namespace zc::test
