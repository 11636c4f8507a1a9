// The activations' scalar definitions, shared by their eager kernels (ops/unary.cpp) and by a
// library product's epilogue run after it (cpu/gemm_epilogue.h), so both round alike.
#pragma once

#include <cmath>

namespace zc::cpu {

// NaN stays NaN, as in torch.
template <class T>
T relu_value(T x) {
  return x < T(0) ? T(0) : x;
}

// GELU: x Phi(x), or with `tanh_approx` torch's tanh form.
template <class T>
T gelu_value(T x, bool tanh_approx) {
  if (tanh_approx) {
    const T k = T(0.7978845608028654);  // sqrt(2/pi)
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
  return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
}

}  // namespace zc::cpu
