// Mixed precision (torch.autocast's counterpart). Inside an AutocastGuard(dtype) scope on this
// thread (dtype bf16 or f16), products (matmul, linear), convolutions and attention take their
// floating operands in `dtype`, and softmax, log_softmax, layer_norm, sums, means, variances,
// exp, log and pow take them in f32; every other op follows type promotion (a bf16 product
// added to an f32 residual is f32). Parameters keep their dtype: the casts are ops, so f32
// master weights get f32 gradients. backward() runs outside the scope's policy, as torch's
// does. Compiled modules trace under the scope and keep the graphs of calls with and without
// it (or with another dtype) apart.
#pragma once

#include <optional>

#include "zc/dtype.h"

namespace zc {

class AutocastGuard {
 public:
  // Raises zc::Error for a dtype other than bf16 or f16.
  explicit AutocastGuard(DType dtype);
  // Turns autocast off for the scope (what backward() does).
  AutocastGuard();
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> previous_;
};

// The calling thread's autocast dtype; none outside a scope.
std::optional<DType> autocast_dtype();

}  // namespace zc
