// Elementwise ops against the float64 reference: every unary and binary op on random shapes,
// broadcasting, non-contiguous layouts, every floating dtype, integers and bool where the op
// takes them, type promotion, large sizes and zero-size dims.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
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
using zc::ref::Tol;

using zc::ref::name_of;

// By name, so that a failing EXPECT_EQ prints "f64" rather than a byte.
std::string_view dtype_of(const Tensor& t) {
  return zc::dtype_name(t.dtype());
}

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;    // input domain
  double atol = 0;  // extra absolute slack (cancellation near a zero of the function)
};

std::vector<UnaryCase> unary_cases() {
  using std::optional;
  return {
      {"neg", [](auto& x) { return zc::neg(x); }, [](double x) { return -x; }, -3, 3},
      {"abs", [](auto& x) { return zc::abs(x); }, [](double x) { return std::fabs(x); }, -3, 3},
      {"exp", [](auto& x) { return zc::exp(x); }, [](double x) { return std::exp(x); }, -5, 5},
      {"log", [](auto& x) { return zc::log(x); }, [](double x) { return std::log(x); }, 0.05, 20},
      {"sqrt", [](auto& x) { return zc::sqrt(x); }, [](double x) { return std::sqrt(x); }, 0, 20},
      {"rsqrt", [](auto& x) { return zc::rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); },
       0.05, 20},
      {"tanh", [](auto& x) { return zc::tanh(x); }, [](double x) { return std::tanh(x); }, -4, 4},
      {"sigmoid", [](auto& x) { return zc::sigmoid(x); }, zc::ref::sigmoid, -10, 10},
      {"relu", [](auto& x) { return zc::relu(x); }, [](double x) { return x > 0 ? x : 0.0; }, -2,
       2},
      // 1 + erf(x) cancels for negative x: float leaves ~1e-7 absolute error times |x|.
      {"gelu", [](auto& x) { return zc::gelu(x); }, zc::ref::gelu, -5, 5, 1e-6},
      {"gelu_tanh", [](auto& x) { return zc::gelu(x, zc::GeluApprox::tanh); }, zc::ref::gelu_tanh,
       -5, 5, 1e-6},
      {"erf", [](auto& x) { return zc::erf(x); }, [](double x) { return std::erf(x); }, -3, 3},
      {"clamp", [](auto& x) { return zc::clamp(x, -0.5, 0.75); },
       [](double x) { return std::min(std::max(x, -0.5), 0.75); }, -2, 2},
      {"clamp_min", [](auto& x) { return zc::clamp(x, 0.25, std::nullopt); },
       [](double x) { return std::max(x, 0.25); }, -2, 2},
      {"clamp_max", [](auto& x) { return zc::clamp(x, std::nullopt, -0.25); },
       [](double x) { return std::min(x, -0.25); }, -2, 2},
      {"floor", [](auto& x) { return zc::floor(x); }, [](double x) { return std::floor(x); }, -3,
       3},
      {"ceil", [](auto& x) { return zc::ceil(x); }, [](double x) { return std::ceil(x); }, -3, 3},
      {"round", [](auto& x) { return zc::round(x); }, [](double x) { return std::nearbyint(x); },
       -3, 3},
      {"trunc", [](auto& x) { return zc::trunc(x); }, [](double x) { return std::trunc(x); }, -3,
       3},
      {"sin", [](auto& x) { return zc::sin(x); }, [](double x) { return std::sin(x); }, -7, 7},
      {"cos", [](auto& x) { return zc::cos(x); }, [](double x) { return std::cos(x); }, -7, 7},
      {"asin", [](auto& x) { return zc::asin(x); }, [](double x) { return std::asin(x); }, -1, 1},
      {"acos", [](auto& x) { return zc::acos(x); }, [](double x) { return std::acos(x); }, -1, 1},
      {"atan", [](auto& x) { return zc::atan(x); }, [](double x) { return std::atan(x); }, -9, 9},
      {"pow2", [](auto& x) { return zc::pow(x, 2.0); }, [](double x) { return x * x; }, -3, 3},
      {"pow3_negative_base", [](auto& x) { return zc::pow(x, 3.0); },
       [](double x) { return x * x * x; }, -3, -0.1},
      {"pow_half", [](auto& x) { return zc::pow(x, 0.5); }, [](double x) { return std::sqrt(x); },
       0, 9},
      {"pow_neg_1_5", [](auto& x) { return zc::pow(x, -1.5); },
       [](double x) { return std::pow(x, -1.5); }, 0.2, 5},
  };
}

TEST(OpsElementwise, UnaryEveryOpLayoutAndFloatDType) {
  std::mt19937 rng(101);
  zc::manual_seed(101);
  for (const auto& c : unary_cases()) {
    for (DType dt : zc::ref::float_dtypes()) {
      Shape shape = zc::ref::random_shape(rng, 1, 4, 6);
      Arr x = zc::ref::uniform(shape, c.lo, c.hi);
      for (auto& [lname, xt] : zc::ref::inputs(x, dt)) {
        SCOPED_TRACE(c.name + " " + name_of(dt) + " " + lname + " " + zc::ref::show(shape));
        Arr xin = zc::ref::read(xt);  // the values the dtype really holds
        Arr want = zc::ref::map(xin, c.ref);
        Tol tol = zc::ref::pointwise_tol(dt);
        tol.atol += c.atol * (dt == DType::f64 ? 1e-8 : 1.0);
        Tensor y = c.op(xt);
        EXPECT_TRUE(zc::ref::close(y, want, dt, tol));
        EXPECT_EQ(zc::ref::read(xt).v, xin.v) << "the input was modified";
      }
    }
  }
}

TEST(OpsElementwise, UnaryOnZeroDimAndSizeOneDims) {
  for (const auto& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    for (Shape shape : {Shape{}, Shape{1}, Shape{1, 1, 3}}) {
      Arr x = zc::ref::uniform(shape, c.lo, c.hi);
      Tensor xt = zc::ref::make(x, DType::f32);
      Arr xin = zc::ref::read(xt);
      Tol tol = zc::ref::pointwise_tol(DType::f32);
      tol.atol += c.atol;
      EXPECT_TRUE(zc::ref::close(c.op(xt), zc::ref::map(xin, c.ref), DType::f32, tol));
    }
  }
}

TEST(OpsElementwise, UnaryLargeNonContiguous) {
  // 100003 elements (odd, to leave a remainder after any vector width or chunking), read with
  // step 2 so the parallel path also sees a strided input.
  zc::manual_seed(5);
  Arr x = zc::ref::uniform({200006}, -3, 3);
  Tensor base = zc::ref::make(x, DType::f32);
  Tensor xs = base.slice(0, 1, 200006, 2);
  Arr xin = zc::ref::read(xs);
  ASSERT_EQ(xin.numel(), 100003);
  EXPECT_TRUE(zc::ref::close(zc::exp(xs), zc::ref::map(xin, [](double v) { return std::exp(v); }),
                             DType::f32));
  EXPECT_TRUE(
      zc::ref::close(zc::gelu(xs), zc::ref::map(xin, zc::ref::gelu), DType::f32, {1e-6, 1e-6}));
  EXPECT_TRUE(zc::ref::close(
      zc::relu(base), zc::ref::map(zc::ref::read(base), [](double v) { return v > 0 ? v : 0.0; }),
      DType::f32));
}

TEST(OpsElementwise, UnaryIntegers) {
  Arr x = zc::ref::small_ints({3, 4}, -5, 5);
  for (DType dt : {DType::i32, DType::i64}) {
    SCOPED_TRACE(name_of(dt));
    Tensor xt = zc::ref::make(x, dt, Layout::column_major);
    EXPECT_TRUE(zc::ref::close(zc::neg(xt), zc::ref::map(x, [](double v) { return -v; }), dt));
    EXPECT_TRUE(
        zc::ref::close(zc::abs(xt), zc::ref::map(x, [](double v) { return std::fabs(v); }), dt));
    EXPECT_TRUE(zc::ref::close(zc::relu(xt),
                               zc::ref::map(x, [](double v) { return v > 0 ? v : 0.0; }), dt));
    EXPECT_TRUE(zc::ref::close(zc::clamp(xt, -2, 3),
                               zc::ref::map(x, [](double v) { return std::clamp(v, -2.0, 3.0); }),
                               dt));
    // Integers are integral already: rounding keeps them and their dtype.
    for (const Tensor& r : {zc::floor(xt), zc::ceil(xt), zc::round(xt), zc::trunc(xt)}) {
      EXPECT_TRUE(zc::ref::close(r, x, dt));
    }
    // sin and cos are float-valued: integers give f32, as exp.
    EXPECT_TRUE(zc::ref::close(zc::sin(xt), zc::ref::map(x, [](double v) { return std::sin(v); }),
                               DType::f32));
    EXPECT_TRUE(zc::ref::close(zc::cos(xt), zc::ref::map(x, [](double v) { return std::cos(v); }),
                               DType::f32));
  }
}

struct BinaryCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  double alo, ahi, blo, bhi;
  bool comparison = false;
  bool ints = true;  // also defined on integer tensors with an integer result
};

// C's fmod and Python's %, with zc's rule for an integer divisor of 0 (the float draws never
// give one).
double ref_fmod(double a, double b) {
  return b == 0 ? 0.0 : std::fmod(a, b);
}
double ref_remainder(double a, double b) {
  if (b == 0) return 0.0;
  const double r = std::fmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

std::vector<BinaryCase> binary_cases() {
  auto cmp = [](auto f) { return [f](double a, double b) { return f(a, b) ? 1.0 : 0.0; }; };
  return {
      {"add", [](auto& a, auto& b) { return zc::add(a, b); }, std::plus<double>(), -3, 3, -3, 3},
      {"sub", [](auto& a, auto& b) { return zc::sub(a, b); }, std::minus<double>(), -3, 3, -3, 3},
      {"mul", [](auto& a, auto& b) { return zc::mul(a, b); }, std::multiplies<double>(), -3, 3, -3,
       3},
      {"div", [](auto& a, auto& b) { return zc::div(a, b); }, std::divides<double>(), -3, 3, 0.5, 3,
       false, false},
      {"pow", [](auto& a, auto& b) { return zc::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, 0.2, 3, -2, 2, false, false},
      {"maximum", [](auto& a, auto& b) { return zc::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, -3, 3, -3, 3},
      {"minimum", [](auto& a, auto& b) { return zc::minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, -3, 3, -3, 3},
      // Divisors of either sign (draw_b); integer ones include 0, which gives 0.
      {"fmod", [](auto& a, auto& b) { return zc::fmod(a, b); }, ref_fmod, -7, 7, 0.5, 3},
      {"remainder", [](auto& a, auto& b) { return zc::remainder(a, b); }, ref_remainder, -7, 7, 0.5,
       3},
      // Comparisons draw small integers so that ties are frequent.
      {"eq", [](auto& a, auto& b) { return zc::eq(a, b); }, cmp(std::equal_to<double>()), -2, 2, -2,
       2, true},
      {"ne", [](auto& a, auto& b) { return zc::ne(a, b); }, cmp(std::not_equal_to<double>()), -2, 2,
       -2, 2, true},
      {"lt", [](auto& a, auto& b) { return zc::lt(a, b); }, cmp(std::less<double>()), -2, 2, -2, 2,
       true},
      {"le", [](auto& a, auto& b) { return zc::le(a, b); }, cmp(std::less_equal<double>()), -2, 2,
       -2, 2, true},
      {"gt", [](auto& a, auto& b) { return zc::gt(a, b); }, cmp(std::greater<double>()), -2, 2, -2,
       2, true},
      {"ge", [](auto& a, auto& b) { return zc::ge(a, b); }, cmp(std::greater_equal<double>()), -2,
       2, -2, 2, true},
  };
}

Arr draw(const Shape& s, double lo, double hi, bool ints) {
  return ints ? zc::ref::small_ints(s, static_cast<int>(lo), static_cast<int>(hi))
              : zc::ref::uniform(s, lo, hi);
}

// Division and remainders draw their divisor away from zero, with either sign.
Arr draw_b(const BinaryCase& c, const Shape& s, bool ints) {
  Arr b = draw(s, c.blo, c.bhi, ints);
  if (c.name == "div" || c.name == "fmod" || c.name == "remainder") {
    Arr sign = zc::ref::uniform(s, 0, 1);
    for (int64_t i = 0; i < b.numel(); ++i) b.v[i] = sign.v[i] < 0.5 ? -b.v[i] : b.v[i];
  }
  return b;
}

// Pairs of shapes that broadcast: equal, trailing-aligned, both-sided and 0-dim.
std::vector<std::pair<Shape, Shape>> broadcast_pairs(std::mt19937& rng) {
  std::vector<std::pair<Shape, Shape>> r{
      {{3, 1, 5}, {4, 1}},    {{1}, {2, 3}}, {{2, 3}, {}},  {{5, 1, 1}, {1, 4, 1}},
      {{2, 3, 4}, {2, 3, 4}}, {{}, {}},      {{1, 1}, {1}}, {{7, 1}, {7}}};
  for (int i = 0; i < 3; ++i) {
    Shape a = zc::ref::random_shape(rng, 1, 4, 5), b = a;
    std::uniform_int_distribution<int> coin(0, 2);
    for (auto& d : b)
      if (coin(rng) == 0) d = 1;
    for (auto& d : a)
      if (coin(rng) == 0) d = 1;
    if (coin(rng) == 0) b.erase(b.begin());
    r.emplace_back(a, b);
  }
  return r;
}

TEST(OpsElementwise, BinaryEveryOpBroadcastAndFloatDType) {
  std::mt19937 rng(202);
  zc::manual_seed(202);
  auto pairs = broadcast_pairs(rng);
  for (const auto& c : binary_cases()) {
    for (DType dt : zc::ref::float_dtypes()) {
      for (auto& [sa, sb] : pairs) {
        Arr a = draw(sa, c.alo, c.ahi, c.comparison), b = draw_b(c, sb, c.comparison);
        // a non-contiguous in a layout we build; b once packed, once as an expand view.
        Tensor at = zc::ref::make(a, dt, a.dim() >= 2 ? Layout::column_major : Layout::strided);
        Tensor bt = zc::ref::make(b, dt);
        SCOPED_TRACE(c.name + " " + name_of(dt) + " " + zc::ref::show(sa) + " with " +
                     zc::ref::show(sb));
        Arr ain = zc::ref::read(at), bin = zc::ref::read(bt);
        Arr want = zc::ref::zip(ain, bin, c.ref);
        DType out = c.comparison ? DType::boolean : dt;
        Tol tol = zc::ref::pointwise_tol(out);
        EXPECT_TRUE(zc::ref::close(c.op(at, bt), want, out, tol));
        EXPECT_TRUE(zc::ref::close(c.op(at, bt.expand(want.shape)), want, out, tol));
      }
    }
  }
}

TEST(OpsElementwise, BinaryIntegersAndBool) {
  std::mt19937 rng(303);
  zc::manual_seed(303);
  for (const auto& c : binary_cases()) {
    if (!c.ints) continue;
    for (DType dt : {DType::i32, DType::i64}) {
      SCOPED_TRACE(c.name + " " + name_of(dt));
      Arr a = zc::ref::small_ints({3, 1, 5}, -6, 6), b = zc::ref::small_ints({4, 1}, -6, 6);
      Tensor at = zc::ref::make(a, dt, Layout::strided), bt = zc::ref::make(b, dt);
      DType out = c.comparison ? DType::boolean : dt;
      EXPECT_TRUE(zc::ref::close(c.op(at, bt), zc::ref::zip(a, b, c.ref), out));
    }
    if (c.comparison) {
      SCOPED_TRACE(c.name + " bool");
      Arr a = zc::ref::small_ints({4, 3}, 0, 1), b = zc::ref::small_ints({3}, 0, 1);
      Tensor at = zc::ref::make(a, DType::boolean), bt = zc::ref::make(b, DType::boolean);
      EXPECT_TRUE(zc::ref::close(c.op(at, bt), zc::ref::zip(a, b, c.ref), DType::boolean));
    }
  }
  // True division of integers gives f32, never truncates.
  Arr a = zc::ref::small_ints({6}, -7, 7), b{{6}, {2, -4, 3, 7, -1, 5}};
  for (DType dt : {DType::i32, DType::i64}) {
    Tensor q = zc::div(zc::ref::make(a, dt), zc::ref::make(b, dt));
    EXPECT_TRUE(zc::ref::close(q, zc::ref::zip(a, b, std::divides<double>()), DType::f32));
  }
}

TEST(OpsElementwise, BinaryLargeBroadcast) {
  zc::manual_seed(9);
  Arr a = zc::ref::uniform({100000}, -1, 1), b = zc::ref::uniform({1}, -1, 1);
  Tensor at = zc::ref::make(a, DType::f32), bt = zc::ref::make(b, DType::f32);
  EXPECT_TRUE(zc::ref::close(zc::add(at, bt), zc::ref::zip(a, b, std::plus<double>()), DType::f32));
  // Rows broadcast against a column: the inner dim is large, the outer small.
  Arr r = zc::ref::uniform({3, 1}, -1, 1), s = zc::ref::uniform({40001}, -1, 1);
  EXPECT_TRUE(zc::ref::close(zc::mul(zc::ref::make(r, DType::f32), zc::ref::make(s, DType::f32)),
                             zc::ref::zip(r, s, std::multiplies<double>()), DType::f32));
  Arr c = zc::ref::small_ints({100000}, 0, 3), d = zc::ref::small_ints({100000}, 0, 3);
  EXPECT_TRUE(zc::ref::close(
      zc::lt(zc::ref::make(c, DType::i64), zc::ref::make(d, DType::i64)),
      zc::ref::zip(c, d, [](double x, double y) { return x < y ? 1.0 : 0.0; }), DType::boolean));
}

TEST(OpsElementwise, Where) {
  zc::manual_seed(404);
  Arr c = zc::ref::small_ints({3, 1}, 0, 1), a = zc::ref::uniform({1, 4}, -1, 1);
  Arr b = zc::ref::uniform({3, 4}, -1, 1);
  Tensor ct = zc::ref::make(c, DType::boolean);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32}) {
    SCOPED_TRACE(name_of(dt));
    // Integers in [-8, 8], exact in every dtype; where only selects.
    auto eighths = [](double v) { return std::round(v * 8); };
    Tensor at = zc::ref::make(zc::ref::map(a, eighths), dt);
    Tensor bt = zc::ref::make(zc::ref::map(b, eighths), dt, Layout::column_major);
    Arr want = zc::ref::where(c, zc::ref::read(at), zc::ref::read(bt));
    EXPECT_TRUE(zc::ref::close(zc::where(ct, at, bt), want, dt, {0, 0}));
  }
  // The condition itself non-contiguous and broadcast along rows.
  Arr c2 = zc::ref::small_ints({4, 3}, 0, 1);
  Tensor c2t = zc::ref::make(c2, DType::boolean, Layout::column_major);
  Arr x = zc::ref::uniform({4, 3}, -1, 1);
  Tensor xt = zc::ref::make(x, DType::f32);
  Tensor zero = zc::zeros({3});
  EXPECT_TRUE(zc::ref::close(zc::where(c2t, xt, zero),
                             zc::ref::where(c2, zc::ref::read(xt), zc::ref::constant({3}, 0)),
                             DType::f32, {0, 0}));
  // a and b of different dtypes promote.
  EXPECT_EQ(dtype_of(zc::where(ct, zc::zeros({1, 4}), zc::zeros({3, 4}, DType::f64))), "f64");
  // A bool result of a comparison is a valid condition.
  Tensor m = zc::gt(xt, zc::scalar_tensor(0));
  EXPECT_TRUE(zc::ref::close(
      zc::where(m, xt, zero),
      zc::ref::map(zc::ref::read(xt), [](double v) { return v > 0 ? v : 0; }), DType::f32, {0, 0}));
}

TEST(OpsElementwise, CastEveryDTypePair) {
  Arr x{{2, 4}, {-2.75, -1.5, -0.25, 0, 0.5, 1.25, 3.5, 100.7}};
  Arr xb{{2, 4}, {0, 1, 1, 0, 1, 0, 0, 1}};
  for (DType from :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    for (DType to : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64,
                     DType::boolean}) {
      SCOPED_TRACE(name_of(from) + " -> " + name_of(to));
      Tensor xt = zc::ref::make(from == DType::boolean ? xb : x, from, Layout::column_major);
      // Floats truncate toward zero on the way to integers; anything nonzero is true.
      Arr want =
          zc::ref::map(zc::ref::read(xt), [to](double v) { return zc::ref::round_to(v, to); });
      EXPECT_TRUE(zc::ref::close(zc::cast(xt, to), want, to, {0, 0}));
    }
  }
}

TEST(OpsElementwise, OperatorsWithTensorsAndScalars) {
  zc::manual_seed(505);
  Arr a = zc::ref::uniform({4, 3}, -2, 2), b = zc::ref::uniform({3}, 0.5, 2);
  Tensor at = zc::ref::make(a, DType::f32, Layout::column_major), bt = zc::ref::make(b, DType::f32);
  auto check = [](const Tensor& got, const Arr& want) {
    return zc::ref::close(got, want, DType::f32);
  };
  using zc::ref::map;
  using zc::ref::zip;
  EXPECT_TRUE(check(at + bt, zip(a, b, std::plus<double>())));
  EXPECT_TRUE(check(at - bt, zip(a, b, std::minus<double>())));
  EXPECT_TRUE(check(at * bt, zip(a, b, std::multiplies<double>())));
  EXPECT_TRUE(check(at / bt, zip(a, b, std::divides<double>())));
  EXPECT_TRUE(check(-at, map(a, [](double v) { return -v; })));
  // Whether 0.1 is rounded to float before or after the add is within the tolerance.
  EXPECT_TRUE(check(at + 0.1, map(a, [](double v) { return v + 0.1; })));
  EXPECT_TRUE(check(at - 2.5, map(a, [](double v) { return v - 2.5; })));
  EXPECT_TRUE(check(at * 3.0, map(a, [](double v) { return v * 3; })));
  EXPECT_TRUE(check(at / 4.0, map(a, [](double v) { return v / 4; })));
  EXPECT_TRUE(check(1.5 + at, map(a, [](double v) { return 1.5 + v; })));
  EXPECT_TRUE(check(1.5 - at, map(a, [](double v) { return 1.5 - v; })));
  EXPECT_TRUE(check(-2.0 * at, map(a, [](double v) { return -2 * v; })));
  EXPECT_TRUE(check(2.0 / bt, map(b, [](double v) { return 2 / v; })));
  EXPECT_TRUE(check((at + 1.0) * (at - 1.0), map(a, [](double v) { return (v + 1) * (v - 1); })));
  EXPECT_TRUE(check(zc::maximum(at, 0.25), map(a, [](double v) { return std::max(v, 0.25); })));
  EXPECT_TRUE(check(zc::minimum(at, -0.5), map(a, [](double v) { return std::min(v, -0.5); })));
  // Comparisons with a scalar; the values sit on a grid of halves so that ties occur.
  Arr g = zc::ref::map(a, [](double v) { return std::round(v * 2) / 2; });
  Tensor gt = zc::ref::make(g, DType::f32, Layout::strided);
  auto cmp = [&](const Tensor& got, auto f) {
    return zc::ref::close(got, map(g, [&](double v) { return f(v) ? 1.0 : 0.0; }), DType::boolean);
  };
  EXPECT_TRUE(cmp(zc::eq(gt, 0.5), [](double v) { return v == 0.5; }));
  EXPECT_TRUE(cmp(zc::ne(gt, 0.5), [](double v) { return v != 0.5; }));
  EXPECT_TRUE(cmp(zc::lt(gt, 0.0), [](double v) { return v < 0; }));
  EXPECT_TRUE(cmp(zc::le(gt, 0.0), [](double v) { return v <= 0; }));
  EXPECT_TRUE(cmp(zc::gt(gt, -1.0), [](double v) { return v > -1; }));
  EXPECT_TRUE(cmp(zc::ge(gt, -1.0), [](double v) { return v >= -1; }));
  EXPECT_EQ(zc::wrap_scalar(2.5).dim(), 0);
  EXPECT_EQ(zc::wrap_scalar(2.5).item<double>(), 2.5);
}

TEST(OpsElementwise, TypePromotion) {
  auto t = [](DType d) { return zc::ones({2, 2}, d); };
  EXPECT_EQ(dtype_of(zc::add(t(DType::f32), t(DType::f64))), "f64");
  EXPECT_EQ(dtype_of(zc::add(t(DType::i32), t(DType::f32))), "f32");
  EXPECT_EQ(dtype_of(zc::mul(t(DType::i32), t(DType::i64))), "i64");
  EXPECT_EQ(dtype_of(zc::sub(t(DType::f16), t(DType::bf16))), "f32");
  EXPECT_EQ(dtype_of(zc::add(t(DType::f16), t(DType::f32))), "f32");
  EXPECT_EQ(dtype_of(zc::add(t(DType::boolean), t(DType::i32))), "i32");
  EXPECT_EQ(dtype_of(zc::maximum(t(DType::i64), t(DType::bf16))), "bf16");
  // A scalar does not widen within a category...
  EXPECT_EQ(dtype_of(t(DType::f16) * 2.0), "f16");
  EXPECT_EQ(dtype_of(t(DType::bf16) + 0.5), "bf16");
  EXPECT_EQ(dtype_of(2.0 * t(DType::f32)), "f32");
  EXPECT_EQ(dtype_of(t(DType::f64) / 3.0), "f64");
  // ...but a floating scalar lifts an integer tensor to the default float type.
  EXPECT_EQ(dtype_of(t(DType::i32) + 2.5), "f32");
  EXPECT_EQ(dtype_of(t(DType::i64) * 0.5), "f32");
  EXPECT_EQ(dtype_of(zc::div(t(DType::i64), t(DType::i64))), "f32");
  // The same holds when the tensor itself is 0-dim (a loss scaled by 0.5 stays f32).
  EXPECT_EQ(dtype_of(zc::scalar_tensor(2.0) + 0.5), "f32");
  EXPECT_EQ(dtype_of(zc::scalar_tensor(2.0) * 0.5), "f32");
  EXPECT_EQ(dtype_of(zc::pow(zc::scalar_tensor(2.0), 0.5)), "f32");
  EXPECT_EQ(dtype_of(zc::scalar_tensor(2.0, DType::f16) - 0.25), "f16");
  EXPECT_EQ(dtype_of(zc::scalar_tensor(2.0, DType::i32) + 2.5), "f32");
  EXPECT_EQ(dtype_of(t(DType::i32) / 2.0), "f32");
  for (DType d : {DType::f32, DType::f16, DType::i32, DType::i64, DType::boolean})
    EXPECT_EQ(dtype_of(zc::le(t(d), t(DType::f64))), "bool") << name_of(d);
  // Values through the promotion are right too.
  Tensor i = zc::from_values<int32_t>({1, -2, 3}, {3});
  Tensor f = zc::from_vector({0.5f, 0.25f, -1.f}, {3});
  EXPECT_TRUE(zc::ref::close(zc::add(i, f), Arr{{3}, {1.5, -1.75, 2}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(i + 2.5, Arr{{3}, {3.5, 0.5, 5.5}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(
      zc::div(zc::from_values<int64_t>({7, -7, 1}, {3}), zc::from_values<int64_t>({2, 2, 3}, {3})),
      Arr{{3}, {3.5, -3.5, 1.0 / 3}}, DType::f32));
  Tensor h = zc::ref::make(Arr{{2}, {1.5, 1000}}, DType::f16);
  EXPECT_TRUE(zc::ref::close(h * 2.0, Arr{{2}, {3, 2000}}, DType::f16, {0, 0}));
}

TEST(OpsElementwise, ZeroSizeDimsWorkOrThrow) {
  Tensor e = zc::zeros({0, 3}), r = zc::ones({3});
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::add(e, r); }, {0, 3}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::exp(e); }, {0, 3}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::gelu(e.t()); }, {3, 0}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::lt(e, r); }, {0, 3}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return e * 2.0; }, {0, 3}));
  EXPECT_TRUE(zc::ref::works_or_throws(
      [&] {
        return zc::where(zc::zeros({0, 1}, DType::boolean), e, r);
      },
      {0, 3}));
  EXPECT_TRUE(zc::ref::works_or_throws(
      [&] {
        return zc::add(zc::zeros({2, 0}), zc::ones({1}));
      },
      {2, 0}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::cast(e, DType::f16); }, {0, 3}));
}

TEST(OpsElementwise, SpecialValuesPropagate) {
  const double inf = INFINITY, nan = NAN;
  Arr x{{5}, {inf, -inf, nan, 0, -0.0}};
  Tensor xt = zc::ref::make(x, DType::f32);
  EXPECT_TRUE(zc::ref::close(zc::exp(xt), Arr{{5}, {inf, 0, nan, 1, 1}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::tanh(xt), Arr{{5}, {1, -1, nan, 0, 0}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::sigmoid(xt), Arr{{5}, {1, 0, nan, 0.5, 0.5}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::relu(zc::ref::make(Arr{{2}, {inf, -inf}}, DType::f32)),
                             Arr{{2}, {inf, 0}}, DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::log(zc::ref::make(Arr{{2}, {0, -1}}, DType::f32)),
                             Arr{{2}, {-inf, nan}}, DType::f32));
  // sigmoid must not overflow to NaN for large |x|.
  EXPECT_TRUE(zc::ref::close(zc::sigmoid(zc::ref::make(Arr{{2}, {-100, 100}}, DType::f32)),
                             Arr{{2}, {zc::ref::sigmoid(-100), 1}}, DType::f32, {1e-6, 1e-30}));
}

// Equal to the bit but for NaN's payload: values, infinities and the sign of every zero.
::testing::AssertionResult same_bits(const Tensor& got, const Arr& want, DType dtype) {
  if (got.dtype() != dtype) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_of(got) << ", expected " << name_of(dtype);
  }
  Arr g = zc::ref::read(got);
  if (g.shape != want.shape) return ::testing::AssertionFailure() << "shape differs";
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double x = g.v[i], y = want.v[i];
    const bool ok = std::isnan(y) ? std::isnan(x) : x == y && std::signbit(x) == std::signbit(y);
    if (!ok) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << x << ", expected " << y;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(OpsElementwise, RoundingTakesHalvesToEvenAndKeepsSpecialValues) {
  const double inf = INFINITY, nan = NAN;
  const Arr x{{14},
              {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 0.0, inf, -inf, nan, -0.25, 1e20, -3.75}};
  const Arr floor{{14}, {0, 1, 2, -1, -2, -3, -0.0, 0, inf, -inf, nan, -1, 1e20, -4}};
  const Arr ceil{{14}, {1, 2, 3, -0.0, -1, -2, -0.0, 0, inf, -inf, nan, -0.0, 1e20, -3}};
  const Arr round{{14}, {0, 2, 2, -0.0, -2, -2, -0.0, 0, inf, -inf, nan, -0.0, 1e20, -4}};
  const Arr trunc{{14}, {0, 1, 2, -0.0, -1, -2, -0.0, 0, inf, -inf, nan, -0.0, 1e20, -3}};
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(name_of(dt));
    // 1e20 is past f16's range: inf there, which every rounding keeps.
    Tensor xt = zc::ref::make(x, dt, Layout::strided);
    auto in_dtype = [&](const Arr& a) { return zc::ref::read(zc::ref::make(a, dt)); };
    EXPECT_TRUE(same_bits(zc::floor(xt), in_dtype(floor), dt));
    EXPECT_TRUE(same_bits(zc::ceil(xt), in_dtype(ceil), dt));
    EXPECT_TRUE(same_bits(zc::round(xt), in_dtype(round), dt));
    EXPECT_TRUE(same_bits(zc::trunc(xt), in_dtype(trunc), dt));
  }
  // bool is integral: returned as it is.
  Tensor b = zc::ref::make(Arr{{3}, {1, 0, 1}}, DType::boolean);
  EXPECT_TRUE(same_bits(zc::round(b), Arr{{3}, {1, 0, 1}}, DType::boolean));
  // From 2^52 on every double is an integer: unchanged.
  const double big = 4503599627370497.0;
  Tensor d = zc::ref::make(Arr{{2}, {big, -big}}, DType::f64);
  EXPECT_TRUE(same_bits(zc::round(d), Arr{{2}, {big, -big}}, DType::f64));
  EXPECT_TRUE(same_bits(zc::floor(d), Arr{{2}, {big, -big}}, DType::f64));
}

// Outside [-1, 1] asin and acos are NaN; at the ends, +-pi/2 and 0 or pi; atan of the
// infinities is +-pi/2; NaN stays NaN and signed zeros keep their sign (asin, atan).
TEST(OpsElementwise, InverseTrigAtSpecialValues) {
  const double inf = INFINITY, nan = NAN;
  Tensor x = zc::ref::make(Arr{{8}, {inf, -inf, nan, 0, -0.0, 1, -1, 1.5}}, DType::f32);
  const float pi = static_cast<float>(M_PI), half = static_cast<float>(M_PI / 2);
  EXPECT_TRUE(
      same_bits(zc::asin(x), Arr{{8}, {nan, nan, nan, 0, -0.0, half, -half, nan}}, DType::f32));
  EXPECT_TRUE(
      same_bits(zc::acos(x), Arr{{8}, {nan, nan, nan, half, half, 0, pi, nan}}, DType::f32));
  EXPECT_TRUE(same_bits(zc::atan(x),
                        Arr{{8},
                            {half, -half, nan, 0, -0.0, static_cast<float>(M_PI / 4),
                             -static_cast<float>(M_PI / 4), std::atan(1.5f)}},
                        DType::f32));
}

TEST(OpsElementwise, SinAndCosAtSpecialValues) {
  const double inf = INFINITY, nan = NAN;
  Tensor x = zc::ref::make(Arr{{5}, {inf, -inf, nan, 0, -0.0}}, DType::f32);
  EXPECT_TRUE(same_bits(zc::sin(x), Arr{{5}, {nan, nan, nan, 0, -0.0}}, DType::f32));
  EXPECT_TRUE(same_bits(zc::cos(x), Arr{{5}, {nan, nan, nan, 1, 1}}, DType::f32));
  // Large arguments reduce exactly (float's sin of 1e6 is the sin of that float).
  Arr big{{3}, {1e6, -3.0e7, 123456.789}};
  Tensor bt = zc::ref::make(big, DType::f32);
  Arr bin = zc::ref::read(bt);
  EXPECT_TRUE(zc::ref::close(zc::sin(bt), zc::ref::map(bin, [](double v) { return std::sin(v); }),
                             DType::f32));
  EXPECT_TRUE(zc::ref::close(zc::cos(bt), zc::ref::map(bin, [](double v) { return std::cos(v); }),
                             DType::f32));
}

TEST(OpsElementwise, FmodHasTheDividendsSignAndRemainderTheDivisors) {
  const double inf = INFINITY, nan = NAN;
  // Each column: a, b, fmod, remainder.
  const std::vector<std::array<double, 4>> rows{
      {5, 3, 2, 2},        {-5, 3, -2, 1},
      {5, -3, 2, -1},      {-5, -3, -2, -2},
      {5.5, 2, 1.5, 1.5},  {-5.5, 2, -1.5, 0.5},
      {6, 3, 0, 0},        {-6, 3, -0.0, 0},
      {6, -3, 0, -0.0},    {-6, -3, -0.0, -0.0},
      {-0.0, 3, -0.0, 0},  {0, -3, 0, -0.0},
      {0.75, 0.25, 0, 0},  {5, 0, nan, nan},
      {5, -0.0, nan, nan}, {inf, 3, nan, nan},
      {5, inf, 5, 5},      {-5, inf, -5, inf},
      {5, -inf, 5, -inf},  {nan, 3, nan, nan},
      {5, nan, nan, nan},  {-1.0e-30, 1, -1.0e-30, 1},
  };
  Arr a{{static_cast<int64_t>(rows.size())}, {}}, b = a, f = a, r = a;
  for (const auto& row : rows) {
    a.v.push_back(row[0]);
    b.v.push_back(row[1]);
    f.v.push_back(row[2]);
    r.v.push_back(row[3]);
  }
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(name_of(dt));
    Tensor at = zc::ref::make(a, dt, Layout::strided), bt = zc::ref::make(b, dt);
    auto in_dtype = [&](const Arr& x) { return zc::ref::read(zc::ref::make(x, dt)); };
    EXPECT_TRUE(same_bits(zc::fmod(at, bt), in_dtype(f), dt));
    // -1e-30 + 1 rounds to 1 in both types, as it does in Python.
    EXPECT_TRUE(same_bits(zc::remainder(at, bt), in_dtype(r), dt));
  }
  // Integers: the same signs; a divisor of 0 gives 0 (no trap), and so does the most negative
  // value by -1, whose quotient overflows.
  for (DType dt : {DType::i32, DType::i64}) {
    SCOPED_TRACE(name_of(dt));
    const double lowest = dt == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
    Arr ia{{9}, {7, -7, 7, -7, 7, -7, 0, lowest, lowest}};
    Arr ib{{9}, {3, 3, -3, -3, 0, 0, 0, -1, 3}};
    Tensor at = zc::ref::make(ia, dt), bt = zc::ref::make(ib, dt, Layout::strided);
    // 2^31 and 2^63 are both 2 more than a multiple of 3.
    EXPECT_TRUE(same_bits(zc::fmod(at, bt), Arr{{9}, {1, -1, 1, -1, 0, 0, 0, 0, -2}}, dt));
    EXPECT_TRUE(same_bits(zc::remainder(at, bt), Arr{{9}, {1, 2, -2, -1, 0, 0, 0, 0, 1}}, dt));
  }
  // Type promotion as the other arithmetic ops: an integral number keeps an integer tensor's
  // dtype, a fractional one makes it f32; 16-bit floats compute in f32 and keep their dtype.
  Tensor i = zc::from_values<int32_t>({7, -7}, {2});
  EXPECT_TRUE(same_bits(zc::fmod(i, 3.0), Arr{{2}, {1, -1}}, DType::i32));
  EXPECT_TRUE(same_bits(zc::remainder(i, 3.0), Arr{{2}, {1, 2}}, DType::i32));
  EXPECT_TRUE(same_bits(zc::remainder(i, -2.5), Arr{{2}, {-0.5, -2}}, DType::f32));
  EXPECT_TRUE(
      same_bits(zc::fmod(i, zc::from_values<int64_t>({4, 4}, {2})), Arr{{2}, {3, -3}}, DType::i64));
  Tensor h = zc::ref::make(Arr{{2}, {-5.5, 5.5}}, DType::f16);
  EXPECT_TRUE(same_bits(zc::remainder(h, 2.0), Arr{{2}, {0.5, 1.5}}, DType::f16));
  EXPECT_TRUE(same_bits(zc::fmod(h, zc::ref::make(Arr{{1}, {-2}}, DType::bf16)),
                        Arr{{2}, {-1.5, 1.5}}, DType::f32));
  // bool operands have no remainder.
  Tensor t = zc::ones({2}, DType::boolean);
  EXPECT_THROW(zc::fmod(t, t), zc::Error);
  EXPECT_THROW(zc::remainder(t, t), zc::Error);
  EXPECT_TRUE(same_bits(zc::remainder(t, zc::from_values<int32_t>({2, -2}, {2})), Arr{{2}, {1, -1}},
                        DType::i32));
}

}  // namespace
