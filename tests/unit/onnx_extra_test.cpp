// The less common ONNX operators zc composes (their cases against ONNX Runtime are in
// onnx_cases_extra.cpp): the hyperbolic functions keep their relative precision near 0 (and
// acosh near 1), eagerly and compiled, against the C library in double.
#include <gtest/gtest.h>

#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <cmath>

#include "unit/onnx_builder.h"
#include "unit/onnx_cases.h"

namespace zc {
namespace {

using test::onnx_model::Builder;
using test::onnx_model::one;

std::shared_ptr<onnx::Model> from(const Builder& b) {
  const std::string bytes = b.bytes();
  return onnx::load_from_bytes(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "test model");
}

// f(x) for each element of x (f32), in double.
Tensor reference(const Tensor& x, double (*f)(double)) {
  Tensor c = x.contiguous();
  std::vector<double> out;
  for (int64_t k = 0; k < c.numel(); ++k) out.push_back(f(c.data<float>()[k]));
  return from_values(out, c.shape());
}

// Magnitudes from 1e-8 to 3, both signs (an argument of 1 + them for acosh, of them less than
// 1 for atanh).
Tensor magnitudes(double lo, double hi, bool both_signs) {
  std::vector<float> v;
  for (double e = std::log10(lo); e <= std::log10(hi); e += 0.125) {
    v.push_back(static_cast<float>(std::pow(10.0, e)));
    if (both_signs) v.push_back(-v.back());
  }
  return from_vector(v, {static_cast<int64_t>(v.size())});
}

TEST(OnnxImport, HyperbolicsKeepTheirRelativePrecisionNearZero) {
  struct Fn {
    const char* op;
    double (*f)(double);
    Tensor x;
  };
  const Tensor near_one = magnitudes(1e-7, 3, false) + 1.0;
  const std::vector<Fn> fns{
      {"Sinh", [](double v) { return std::sinh(v); }, magnitudes(1e-8, 3, true)},
      {"Cosh", [](double v) { return std::cosh(v); }, magnitudes(1e-8, 3, true)},
      {"Asinh", [](double v) { return std::asinh(v); }, magnitudes(1e-8, 3, true)},
      {"Acosh", [](double v) { return std::acosh(v); }, near_one},
      {"Atanh", [](double v) { return std::atanh(v); }, magnitudes(1e-8, 0.9999, true)},
      {"Tan", [](double v) { return std::tan(v); }, magnitudes(1e-8, 1.5, true)},
  };
  NoGradGuard no_grad;
  for (const Fn& fn : fns) {
    SCOPED_TRACE(fn.op);
    auto m = from(one(fn.op, fn.x.shape()));
    const Tensor want = reference(fn.x, fn.f);
    // Relative alone: an absolute tolerance would hide a cancellation near 0.
    EXPECT_TRUE(allclose((*m)(fn.x).to(DType::f64), want, 1e-5, 0));
    EXPECT_TRUE(allclose(compile(m)(fn.x).to(DType::f64), want, 1e-5, 0));
  }
}

}  // namespace
}  // namespace zc

#endif
