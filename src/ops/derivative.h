// What the registry entries' derivative rules share. A rule is ordinary tensor code on the
// public ops, like a decomposition, so these helpers are too: they run eagerly for backward()
// and are traced into backward graphs.
#pragma once

#include <string_view>
#include <vector>

#include "ops/registry.h"
#include "util/check.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::ops {

// g summed over the dims that broadcasting added or stretched, so it has `shape`: the
// gradient of an operand that was broadcast to g's shape.
inline Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  }
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return r.reshape(shape);
}

// A zero that broadcasts against g and keeps its dtype.
inline Tensor zero_like(const Tensor& g) {
  return zeros({}, g.dtype());
}

// Zeros of `shape` on `like`'s device and in its dtype (a broadcast number, not a buffer).
inline Tensor zeros_like_on(const Tensor& like, const Shape& shape) {
  Tensor z = zeros({}, like.dtype());
  if (!like.device().is_cpu()) z = z.to(like.device());
  return z.expand(shape);
}

// The gradient of a reduction over `dims` (normalized) of an input of `shape`: g with the
// reduced dims put back as size 1, broadcast to the input.
inline Tensor unreduce(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims,
                       bool keepdim) {
  Tensor r = g;
  if (!keepdim) {
    Shape kept = shape;
    for (int64_t d : dims) kept[d] = 1;
    r = r.reshape(kept);
  }
  return r.expand(shape);
}

// The gradient of a slice of a dim of length `n`: `grad` (the slice's gradient) at the sliced
// positions, zeros elsewhere (defined in layout.cpp, beside the slice op).
Tensor slice_backward(const Tensor& grad, int64_t n, const SliceAttrs& s);

// What a rule gave input `i` of `op`, as that input's gradient: checked to have the input's
// shape (a rule must undo its broadcasting) and converted to its dtype (rules compute in the
// output's, which promotion may have widened). Eager backward and the joint graph both use it.
inline Tensor input_gradient(std::string_view op, size_t i, Tensor g, const TensorMeta& input) {
  ZC_CHECK(g.shape() == input.shape,
           "the derivative of " << op << " gave input " << i << " a gradient of shape "
                                << shape_str(g.shape()) << ", expected " << shape_str(input.shape));
  return g.dtype() == input.dtype ? g : cast(g, input.dtype);
}

// The one gradient of a single-output op, in the output's compute type.
inline const Tensor& out_grad(const VjpArgs& a) {
  return a.grads[0];
}

}  // namespace zc::ops
