// Small helpers the eager kernels share: dtype conversion without dispatch and the compute
// type of a dtype.
#pragma once

#include "zc/tensor.h"

namespace zc::ops {

// 16-bit floats compute in f32; every other dtype computes as itself.
inline DType compute_dtype(DType t) {
  if (t == DType::i8) return DType::i32;  // as C promotes it; stores wrap to 8 bits
  return t == DType::f16 || t == DType::bf16 ? DType::f32 : t;
}

// A new contiguous tensor with t's values converted to `dtype` (t may have any strides).
Tensor eager_cast(const Tensor& t, DType dtype);
// t itself when it already has `dtype`, else eager_cast.
inline Tensor as_dtype(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : eager_cast(t, dtype);
}
// fn(double{}) when the compute type `ct` is f64, else fn(float{}): for the kernels of ops
// whose compute type is a float (f32 for every 16-bit float).
template <class Fn>
void visit_float_compute(DType ct, Fn&& fn) {
  if (ct == DType::f64) {
    fn(double{});
  } else {
    fn(float{});
  }
}

// t itself when it is contiguous, else a contiguous copy (on t's device).
Tensor eager_contiguous(const Tensor& t);

}  // namespace zc::ops
