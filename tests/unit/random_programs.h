// What the random-program tests share (codegen_random_test.cpp, cnn_random_test.cpp,
// onnx_random_test.cpp): how many programs to walk, and how far a result is from its reference.
#pragma once

#include <cstdlib>
#include <vector>

#include "zc/zc.h"

namespace zc::test {

// `n`, times ZC_RANDOM_PROGRAMS_SCALE when set: a longer hunt than CI's (the seeds past CI's are
// new programs).
inline int scaled_count(int n) {
  const char* scale = std::getenv("ZC_RANDOM_PROGRAMS_SCALE");
  return scale && std::atoi(scale) > 1 ? n * std::atoi(scale) : n;
}

// max |got - want| / (1 + max |want|), in f64 on the CPU: the error relative to the result's own
// scale. A difference of two large sums (x - sum(x)) keeps the large values' rounding, which a
// tolerance relative to each element would call wrong.
inline double scaled_error(const Tensor& got, const Tensor& want) {
  const Tensor w = want.to(Device::cpu()).to(DType::f64);
  const Tensor g = got.to(Device::cpu()).to(DType::f64);
  return max(abs(g - w)).item<double>() / (1.0 + max(abs(w)).item<double>());
}

// The defined tensors of `ts` moved to the CPU (gradients read back from a GPU).
inline std::vector<Tensor> on_cpu(std::vector<Tensor> ts) {
  for (Tensor& t : ts)
    if (t.defined()) t = t.to(Device::cpu());
  return ts;
}

}  // namespace zc::test
