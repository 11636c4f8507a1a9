// Reductions against the float64 reference: single, several, all and negative dims, keepdim,
// non-contiguous inputs, every floating dtype, integers, ties for argmax, numerically hard
// inputs (large means for var, long f16 sums) and sizes past any parallel threshold.
//
// Tolerances: a sum of n terms rounded in float has an error of order eps * sqrt(n) * sum|x|
// when the rounding errors are independent (pairwise or blocked summation, or accumulation in
// double, do better); we allow 4 * eps * (1 + sqrt(n)) * sum|x| for the result type's eps. That
// still fails by orders of magnitude when an element is dropped or counted twice.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "unit/reference.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace {

using zc::DType;
using zc::Shape;
using zc::Tensor;
using zc::ref::Arr;
using zc::ref::Layout;

using zc::ref::name_of;

int64_t reduced_count(const Shape& shape, std::vector<int64_t> dims) {
  int64_t n = 1;
  for (auto d : zc::ref::norm_dims(dims, static_cast<int64_t>(shape.size()))) n *= shape[d];
  return n;
}

// Compares a sum-like reduction, with the error scale sum|x| over each output's inputs.
::testing::AssertionResult close_sum(const Tensor& got, const Arr& x, const Arr& want,
                                     const std::vector<int64_t>& dims, bool keepdim, DType dt,
                                     double divisor = 1) {
  Arr scale = zc::ref::reduce(x, dims, keepdim, zc::ref::r_abs_sum);
  for (double& s : scale.v) s /= divisor;
  const double n = static_cast<double>(reduced_count(x.shape, dims));
  const double rel = 4 * zc::ref::unit_roundoff(dt) * (1 + std::sqrt(n));
  // The result is also rounded once to the output type.
  return zc::ref::close(got, want, dt, {zc::ref::unit_roundoff(dt), 1e-30}, &scale, rel);
}

// Every way to name dims of a rank-`nd` tensor that the tests exercise.
std::vector<std::vector<int64_t>> dim_choices(int64_t nd) {
  std::vector<std::vector<int64_t>> r{{}};
  for (int64_t d = 0; d < nd; ++d) {
    r.push_back({d});
    r.push_back({d - nd});
  }
  if (nd >= 2) {
    r.push_back({0, nd - 1});
    r.push_back({-1, 0});  // unsorted and negative
  }
  if (nd >= 3) r.push_back({0, 1, 2});
  return r;
}

std::string dims_str(const std::vector<int64_t>& d) {
  return zc::ref::show(d);
}

TEST(OpsReduce, SumMeanAmaxAminEveryDimsAndKeepdim) {
  std::mt19937 rng(11);
  zc::manual_seed(11);
  for (int trial = 0; trial < 4; ++trial) {
    Shape shape = zc::ref::random_shape(rng, 1, 4, 6);
    // Rounded to f32 first, so that the reference sees exactly the tensor's values.
    Arr x = zc::ref::map(zc::ref::uniform(shape, -2, 2),
                         [](double v) { return static_cast<double>(static_cast<float>(v)); });
    for (auto& [lname, xt] : zc::ref::inputs(x, DType::f32)) {
      for (const auto& dims : dim_choices(x.dim())) {
        for (bool keep : {false, true}) {
          SCOPED_TRACE(zc::ref::show(shape) + " dims=" + dims_str(dims) +
                       " keepdim=" + std::to_string(keep) + " " + lname);
          const double n = static_cast<double>(reduced_count(shape, dims));
          EXPECT_TRUE(close_sum(zc::sum(xt, dims, keep), x,
                                zc::ref::reduce(x, dims, keep, zc::ref::r_sum), dims, keep,
                                DType::f32));
          EXPECT_TRUE(close_sum(zc::mean(xt, dims, keep), x,
                                zc::ref::reduce(x, dims, keep, zc::ref::r_mean), dims, keep,
                                DType::f32, n));
          // Max and min select an element: exact.
          EXPECT_TRUE(zc::ref::close(zc::amax(xt, dims, keep),
                                     zc::ref::reduce(x, dims, keep, zc::ref::r_max), DType::f32,
                                     {0, 0}));
          EXPECT_TRUE(zc::ref::close(zc::amin(xt, dims, keep),
                                     zc::ref::reduce(x, dims, keep, zc::ref::r_min), DType::f32,
                                     {0, 0}));
        }
      }
    }
  }
}

TEST(OpsReduce, FloatDTypes) {
  zc::manual_seed(12);
  Arr x = zc::ref::uniform({5, 7, 3}, -2, 2);
  for (DType dt : {DType::f64, DType::f16, DType::bf16}) {
    Tensor xt = zc::ref::make(x, dt, Layout::column_major);
    Arr xin = zc::ref::read(xt);
    for (const auto& dims : dim_choices(3)) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(name_of(dt) + " dims=" + dims_str(dims) + " keepdim=" + std::to_string(keep));
        const double n = static_cast<double>(reduced_count(x.shape, dims));
        EXPECT_TRUE(close_sum(zc::sum(xt, dims, keep), xin,
                              zc::ref::reduce(xin, dims, keep, zc::ref::r_sum), dims, keep, dt));
        EXPECT_TRUE(close_sum(zc::mean(xt, dims, keep), xin,
                              zc::ref::reduce(xin, dims, keep, zc::ref::r_mean), dims, keep, dt,
                              n));
        EXPECT_TRUE(zc::ref::close(zc::amax(xt, dims, keep),
                                   zc::ref::reduce(xin, dims, keep, zc::ref::r_max), dt, {0, 0}));
        EXPECT_TRUE(zc::ref::close(zc::amin(xt, dims, keep),
                                   zc::ref::reduce(xin, dims, keep, zc::ref::r_min), dt, {0, 0}));
      }
    }
  }
}

TEST(OpsReduce, MaxMinValues) {
  zc::manual_seed(13);
  Arr x = zc::ref::uniform({4, 6, 5}, -3, 3);
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64}) {
    SCOPED_TRACE(name_of(dt));
    Arr xs = zc::ref::map(x, [](double v) { return std::round(v * 20); });
    Tensor xt = zc::ref::make(xs, dt, Layout::strided);
    Arr xin = zc::ref::read(xt);
    EXPECT_TRUE(zc::ref::close(zc::max(xt), zc::ref::reduce(xin, {}, false, zc::ref::r_max), dt));
    EXPECT_TRUE(zc::ref::close(zc::min(xt), zc::ref::reduce(xin, {}, false, zc::ref::r_min), dt));
    EXPECT_EQ(zc::max(xt).dim(), 0);
    for (int64_t d = -3; d < 3; ++d) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE("dim=" + std::to_string(d) + " keepdim=" + std::to_string(keep));
        EXPECT_TRUE(zc::ref::close(zc::max(xt, d, keep),
                                   zc::ref::reduce(xin, {d}, keep, zc::ref::r_max), dt));
        EXPECT_TRUE(zc::ref::close(zc::min(xt, d, keep),
                                   zc::ref::reduce(xin, {d}, keep, zc::ref::r_min), dt));
      }
    }
  }
}

TEST(OpsReduce, IntegerSumsAreExact) {
  zc::manual_seed(14);
  Arr x = zc::ref::small_ints({6, 5, 4}, -50, 50);
  for (DType dt : {DType::i32, DType::i64}) {
    Tensor xt = zc::ref::make(x, dt, Layout::column_major);
    for (const auto& dims : dim_choices(3)) {
      SCOPED_TRACE(name_of(dt) + " dims=" + dims_str(dims));
      Tensor s = zc::sum(xt, dims);
      // The spec leaves the accumulator width open (torch widens to i64); it must be an integer.
      EXPECT_TRUE(zc::is_integral(s.dtype())) << zc::dtype_name(s.dtype());
      EXPECT_TRUE(zc::ref::close(s, zc::ref::reduce(x, dims, false, zc::ref::r_sum), s.dtype()));
      EXPECT_TRUE(
          zc::ref::close(zc::amax(xt, dims), zc::ref::reduce(x, dims, false, zc::ref::r_max), dt));
      EXPECT_TRUE(
          zc::ref::close(zc::amin(xt, dims), zc::ref::reduce(x, dims, false, zc::ref::r_min), dt));
    }
  }
}

TEST(OpsReduce, Argmax) {
  zc::manual_seed(15);
  // Few distinct values, so ties are everywhere: the first maximum must win.
  Arr x = zc::ref::small_ints({5, 4, 6}, 0, 3);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::i32, DType::i64}) {
    for (auto& [lname, xt] : zc::ref::inputs(x, dt)) {
      SCOPED_TRACE(name_of(dt) + " " + lname);
      // Without a dim: the index into the flattened (logical, row-major) tensor.
      EXPECT_TRUE(zc::ref::close(zc::argmax(xt), zc::ref::reduce(x, {}, false, zc::ref::r_argmax),
                                 DType::i64));
      for (int64_t d = -3; d < 3; ++d) {
        for (bool keep : {false, true}) {
          SCOPED_TRACE("dim=" + std::to_string(d) + " keepdim=" + std::to_string(keep));
          EXPECT_TRUE(zc::ref::close(zc::argmax(xt, d, keep),
                                     zc::ref::reduce(x, {d}, keep, zc::ref::r_argmax), DType::i64));
        }
      }
    }
  }
  Tensor t = zc::from_vector({1, 3, 3, 2}, {4});
  EXPECT_EQ(zc::argmax(t).item<int64_t>(), 1);
  EXPECT_EQ(zc::argmax(t, 0, true).shape(), (Shape{1}));
  EXPECT_EQ(zc::argmax(zc::from_vector({-5, -1, -9}, {3})).item<int64_t>(), 1);
}

TEST(OpsReduce, VarCorrectionDimsKeepdim) {
  std::mt19937 rng(16);
  zc::manual_seed(16);
  for (int trial = 0; trial < 3; ++trial) {
    Shape shape = zc::ref::random_shape(rng, 1, 4, 5);
    for (auto& d : shape) d += 1;  // at least 2 elements per reduced dim: correction 1 is finite
    Arr x = zc::ref::uniform(shape, -2, 2);
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor xt = zc::ref::make(x, dt, Layout::strided);
      for (const auto& dims : dim_choices(x.dim())) {
        for (int64_t corr : {0, 1}) {
          for (bool keep : {false, true}) {
            SCOPED_TRACE(name_of(dt) + " " + zc::ref::show(shape) + " dims=" + dims_str(dims) +
                         " correction=" + std::to_string(corr) +
                         " keepdim=" + std::to_string(keep));
            const double n = static_cast<double>(reduced_count(shape, dims));
            // Two passes of n-term sums of O(1) values, divided by n - correction.
            const double rtol = 8 * zc::ref::unit_roundoff(dt) * (1 + std::sqrt(n));
            EXPECT_TRUE(zc::ref::close(zc::var(xt, dims, corr, keep),
                                       zc::ref::reduce(x, dims, keep, zc::ref::r_var(corr)), dt,
                                       {rtol, rtol}));
          }
        }
      }
    }
  }
  // The default is the unbiased estimate.
  Tensor v = zc::var(zc::from_vector({1, 2, 3, 4}, {4}));
  EXPECT_NEAR(v.item<double>(), 5.0 / 3, 1e-6);
  EXPECT_EQ(v.dim(), 0);
}

TEST(OpsReduce, VarIsStableForALargeMean) {
  // x = 1000 + U(-1, 1): E[x^2] - E[x]^2 in float loses everything (E[x^2] = 1e6 has an ulp of
  // 0.06, the variance is 0.33); a two-pass or Welford kernel keeps ~1e-6 relative.
  zc::manual_seed(17);
  Arr x = zc::ref::map(zc::ref::uniform({4, 2000}, -1, 1), [](double v) { return 1000 + v; });
  Tensor xt = zc::ref::make(x, DType::f32);
  Arr xin = zc::ref::read(xt);
  EXPECT_TRUE(zc::ref::close(zc::var(xt, {1}, 0),
                             zc::ref::reduce(xin, {1}, false, zc::ref::r_var(0)), DType::f32,
                             {1e-3, 0}));
}

TEST(OpsReduce, HalfSumsAccumulateInFloat) {
  // 5000 ones: an f16 accumulator stops at 2048 (where the spacing of f16 becomes 2).
  // 5000 itself is exact in f16 (a multiple of 4 below 8192).
  Tensor x = zc::ones({5000}, DType::f16);
  EXPECT_EQ(zc::sum(x).item<double>(), 5000);
  EXPECT_EQ(zc::sum(zc::ones({5000}, DType::bf16)).item<double>(), 4992);  // bf16(5000)
  EXPECT_EQ(zc::mean(x).item<double>(), 1);
}

TEST(OpsReduce, LargeReductions) {
  zc::manual_seed(18);
  {  // one long contiguous dim, and a strided view of it
    Arr x = zc::ref::uniform({100000}, -1, 1);
    Tensor xt = zc::ref::make(x, DType::f32);
    x = zc::ref::read(xt);
    EXPECT_TRUE(close_sum(zc::sum(xt), x, zc::ref::reduce(x, {}, false, zc::ref::r_sum), {}, false,
                          DType::f32));
    EXPECT_TRUE(close_sum(zc::mean(xt), x, zc::ref::reduce(x, {}, false, zc::ref::r_mean), {},
                          false, DType::f32, 100000));
    EXPECT_TRUE(
        zc::ref::close(zc::amax(xt), zc::ref::reduce(x, {}, false, zc::ref::r_max), DType::f32));
    Tensor xs = xt.slice(0, 1, 100000, 3);
    Arr xsv = zc::ref::read(xs);
    EXPECT_TRUE(close_sum(zc::sum(xs), xsv, zc::ref::reduce(xsv, {}, false, zc::ref::r_sum), {},
                          false, DType::f32));
  }
  {  // a planted maximum far from the start, so every chunk of a parallel argmax matters
    Arr x = zc::ref::uniform({100000}, -1, 1);
    x.v[77777] = 5;
    x.v[99999] = 5;  // a later tie must lose
    Tensor xt = zc::ref::make(x, DType::f32);
    EXPECT_EQ(zc::argmax(xt).item<int64_t>(), 77777);
    EXPECT_EQ(zc::max(xt).item<float>(), 5.f);
  }
  {  // long inner dim with a few rows; long outer dim with few columns
    Arr a = zc::ref::uniform({3, 40000}, 0, 1);
    Tensor at = zc::ref::make(a, DType::f32);
    a = zc::ref::read(at);
    EXPECT_TRUE(close_sum(zc::sum(at, {1}), a, zc::ref::reduce(a, {1}, false, zc::ref::r_sum), {1},
                          false, DType::f32));
    Arr b = zc::ref::uniform({50000, 2}, 0, 1);
    Tensor bt = zc::ref::make(b, DType::f32);
    b = zc::ref::read(bt);
    EXPECT_TRUE(close_sum(zc::mean(bt, {0}, true), b,
                          zc::ref::reduce(b, {0}, true, zc::ref::r_mean), {0}, true, DType::f32,
                          50000));
    EXPECT_TRUE(zc::ref::close(zc::argmax(bt, 0), zc::ref::reduce(b, {0}, false, zc::ref::r_argmax),
                               DType::i64));
    const double n = 50000;
    const double rtol = 8 * zc::ref::unit_roundoff(DType::f32) * (1 + std::sqrt(n));
    EXPECT_TRUE(zc::ref::close(zc::var(bt, {0}), zc::ref::reduce(b, {0}, false, zc::ref::r_var(1)),
                               DType::f32, {rtol, 0}));
  }
}

TEST(OpsReduce, SizeOneAndZeroDim) {
  Tensor s = zc::scalar_tensor(3.5);
  EXPECT_TRUE(zc::ref::close(zc::sum(s), Arr{{}, {3.5}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::amax(s), Arr{{}, {3.5}}, DType::f32));
  Tensor x = zc::from_vector({1, 2, 3}, {1, 3, 1});
  EXPECT_TRUE(zc::ref::close(zc::sum(x, {0, 2}), Arr{{3}, {1, 2, 3}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::mean(x, {1}, true), Arr{{1, 1, 1}, {2}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::var(x, {0}, 0), Arr{{3, 1}, {0, 0, 0}}, DType::f32));
}

TEST(OpsReduce, ZeroSizeDimsWorkOrThrow) {
  Tensor e = zc::zeros({0, 3});
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::sum(e, {1}); }, {0}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::amax(e, {1}, true); }, {0, 1}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::mean(e, {0}); }, {3}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::amax(e, {0}); }, {3}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::argmax(e, 0); }, {3}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::max(e); }, {}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::var(e, {0}); }, {3}));
  // Where the empty sum works it is zero: the identity of addition.
  try {
    Tensor s = zc::sum(e, {0});
    EXPECT_TRUE(zc::ref::close(s, Arr{{3}, {0, 0, 0}}, DType::f32));
    EXPECT_TRUE(zc::ref::close(zc::sum(e), Arr{{}, {0}}, DType::f32));
  } catch (const zc::Error&) {
  }
}

}  // namespace
