// The less common ONNX operators zc composes (their cases against ONNX Runtime are in
// onnx_cases_extra.cpp): the hyperbolic functions keep their relative precision near 0 (and
// acosh near 1), eagerly and compiled, against the C library in double; what the rules refuse
// raises zc::Error naming the node.
#include <gtest/gtest.h>

#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <cmath>
#include <functional>
#include <limits>

#include "unit/onnx_builder.h"
#include "unit/onnx_cases.h"

namespace zc {
namespace {

using test::onnx_model::Attr;
using test::onnx_model::Builder;
using test::onnx_model::expect_refused;
using test::onnx_model::i64_scalar;
using test::onnx_model::i64s;
using test::onnx_model::load_model;
using test::onnx_model::one;

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
    auto m = load_model(one(fn.op, fn.x.shape()));
    const Tensor want = reference(fn.x, fn.f);
    // Relative alone: an absolute tolerance would hide a cancellation near 0.
    EXPECT_TRUE(allclose((*m)(fn.x).to(DType::f64), want, 1e-5, 0));
    EXPECT_TRUE(allclose(compile(m)(fn.x).to(DType::f64), want, 1e-5, 0));
  }
}

TEST(OnnxImport, ExtraOperatorsRefuseBadInputNamingTheNode) {
  auto named = [](const char* op, const Shape& x, std::vector<Attr> attrs,
                  const std::vector<std::pair<std::string, Tensor>>& inits = {},
                  DType xt = DType::f32, int64_t opset = 17) {
    Builder b(opset);
    b.input("x", xt, x).output("out");
    std::vector<std::string> in{"x"};
    for (const auto& [name, t] : inits) {
      b.init(name, t);
      in.push_back(name);
    }
    b.node(op, in, {"out"}, std::move(attrs), "n");
    return b;
  };
  expect_refused(named("LpNormalization", {2, 3}, {Attr("p", 3)}), {randn({2, 3})},
                 "ONNX node 'n' (LpNormalization): p must be 1 or 2, got 3");
  expect_refused(named("GlobalLpPool", {1, 2, 3}, {Attr("p", 0)}), {randn({1, 2, 3})},
                 "ONNX node 'n' (GlobalLpPool): p must be at least 1");
  expect_refused(named("LRN", {1, 2, 3, 3}, {Attr("size", 0)}), {randn({1, 2, 3, 3})},
                 "ONNX node 'n' (LRN): size must be at least 1");
  expect_refused(named("EyeLike", {2, 3, 4}, {}), {randn({2, 3, 4})},
                 "ONNX node 'n' (EyeLike): expected a 2-D input");
  expect_refused(named("Sinh", {3}, {}, {}, DType::i64), {randint(0, 3, {3})},
                 "ONNX node 'n' (Sinh): expected a float input, got i64");
  expect_refused(named("ReduceProd", {2, 3}, {Attr("axes", {1, -1})}), {randn({2, 3})},
                 "ONNX node 'n' (ReduceProd): axes name a dim twice");
  expect_refused(named("ReduceProd", {2, 3}, {Attr("axes", {2})}), {randn({2, 3})},
                 "ONNX node 'n' (ReduceProd): axis 2 is out of range for rank 2");
  expect_refused(named("MeanVarianceNormalization", {2, 3}, {}), {randn({2, 3})},
                 "ONNX node 'n' (MeanVarianceNormalization): axis 2 is out of range for rank 2");
  expect_refused(named("Hardmax", {2, 3}, {Attr("axis", 2)}), {randn({2, 3})},
                 "ONNX node 'n' (Hardmax): axis 2 is out of range");
  const std::vector<std::pair<std::string, Tensor>> three_values{
      {"depth", i64_scalar(3)}, {"values", from_vector({0, 1, 2}, {3})}};
  expect_refused(named("OneHot", {4}, {}, three_values, DType::i64), {randint(0, 3, {4})},
                 "ONNX node 'n' (OneHot): values must have 2 elements");
  expect_refused(
      named("OneHot", {4}, {}, {{"depth", i64_scalar(0)}, {"values", from_vector({0, 1}, {2})}},
            DType::i64),
      {randint(0, 3, {4})}, "ONNX node 'n' (OneHot): depth must be at least 1");
  expect_refused(
      named("OneHot", {4}, {Attr("axis", 2)},
            {{"depth", i64_scalar(3)}, {"values", from_vector({0, 1}, {2})}}, DType::i64),
      {randint(0, 3, {4})}, "ONNX node 'n' (OneHot): axis 2 is out of range for rank 2");
  {
    // A depth computed from the input's values has no size to give the output.
    Builder b;
    b.input("x", DType::i64, {4}).input("d", DType::i64, {}).output("out");
    b.init("values", from_vector({0, 1}, {2}));
    b.node("OneHot", {"x", "d", "values"}, {"out"}, {}, "n");
    expect_refused(b, {randint(0, 3, {4}), i64_scalar(3)},
                   "ONNX node 'n' (OneHot): depth is computed from the model's input values", true);
  }
  {
    // ReduceProd's axes from the input's values, compiled.
    Builder b(18);
    b.input("x", DType::f32, {2, 3}).input("axes", DType::i64, {1}).output("out");
    b.node("ReduceProd", {"x", "axes"}, {"out"}, {}, "n");
    expect_refused(b, {randn({2, 3}), i64s({1})},
                   "ONNX node 'n' (ReduceProd): axes is computed from the model's input values",
                   true);
  }
}

// OneHot's spec casts non-integer indices to int64 before use, so a fractional index is
// truncated toward zero and then, when negative, counted from the end: -0.5 is 0, -2.7 is -2
// (so depth - 2), 2.9 is 2. ONNX Runtime's versions differ here (1.32 casts as the spec says,
// the GPU host's newer one does not) and ONNX's reference takes the float modulo (no position
// then matches): zc follows the spec's text.
TEST(OnnxImport, OneHotCastsFractionalIndicesAsTheSpecSays) {
  Builder b;
  b.input("x", DType::f32, {5}).output("out");
  b.init("depth", i64s({4}));
  b.init("values", from_vector({0.0f, 1.0f}, {2}));
  b.node("OneHot", {"x", "depth", "values"}, {"out"}, {});
  auto m = load_model(b);
  const Tensor x = from_vector({-0.5f, -2.7f, 2.9f, 3.99f, -4.2f}, {5});
  const std::vector<int64_t> hot{0, 2, 2, 3, 0};
  NoGradGuard no_grad;
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    const std::vector<Tensor> out =
        compiled ? compile(m)(std::vector<Tensor>{x}) : (*m)(std::vector<Tensor>{x});
    ASSERT_EQ(out.size(), 1u);
    const Tensor y = out[0].contiguous();
    ASSERT_EQ(y.shape(), Shape({5, 4}));
    for (int64_t r = 0; r < 5; ++r) {
      for (int64_t c = 0; c < 4; ++c) {
        EXPECT_EQ(y.data<float>()[r * 4 + c], c == hot[static_cast<size_t>(r)] ? 1.0f : 0.0f)
            << "row " << r << " column " << c;
      }
    }
  }
}

// ONNX leaves NaN's rank in TopK open (ONNX Runtime's versions differ); zc's is torch's and
// numpy's, as ONNX's reference implementation: NaN above every number, so first when largest
// and last when smallest, NaNs among themselves by index.
TEST(OnnxImport, TopKRanksNaNAboveEveryNumberAsTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = from_vector({1, nan, -inf, nan, inf, 1, nan, 0, inf, -inf, nan, inf}, {2, 6});
  struct Want {
    int64_t largest;
    std::vector<int64_t> idx;
  };
  const std::vector<Want> wants{{1, {1, 3, 4, 0, 5, 0, 4, 2, 5, 1}},
                                {0, {2, 0, 5, 4, 1, 3, 1, 2, 5, 0}}};
  NoGradGuard no_grad;
  for (const Want& w : wants) {
    SCOPED_TRACE("largest " + std::to_string(w.largest));
    Builder b;
    b.input("x", DType::f32, {2, 6}).output("v").output("idx", DType::i64);
    b.init("k", i64s({5}));
    b.node("TopK", {"x", "k"}, {"v", "idx"}, {Attr("largest", w.largest)});
    auto m = load_model(b);
    for (bool compiled : {false, true}) {
      SCOPED_TRACE(compiled ? "compiled" : "eager");
      const std::vector<Tensor> out =
          compiled ? compile(m)(std::vector<Tensor>{x}) : (*m)(std::vector<Tensor>{x});
      ASSERT_EQ(out.size(), 2u);
      const Tensor v = out[0].contiguous(), idx = out[1].contiguous();
      ASSERT_EQ(idx.shape(), Shape({2, 5}));
      for (int64_t k = 0; k < 10; ++k) {
        const int64_t at = w.idx[static_cast<size_t>(k)];
        EXPECT_EQ(idx.data<int64_t>()[k], at) << "element " << k;
        const float want = x.data<float>()[(k / 5) * 6 + at], got = v.data<float>()[k];
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << "element " << k;
      }
    }
  }
}

}  // namespace
}  // namespace zc

#endif
