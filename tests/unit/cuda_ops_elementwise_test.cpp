// Elementwise ops on CUDA against the CPU: unary, cast, binary with promotion and numbers,
// where. The harness, input kinds and tolerances are in cuda_ops_harness.h.
#include "unit/cuda_ops_harness.h"

namespace cuda_ops_test {
namespace {

// ---------------------------------------------------------------------------------------------
// Elementwise unary ops and cast.

struct UnaryOp {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  double lo, hi;  // input domain
};

std::vector<UnaryOp> unary_ops() {
  using std::nullopt;
  return {
      {"neg", [](const Tensor& x) { return zc::neg(x); }, -3, 3},
      {"abs", [](const Tensor& x) { return zc::abs(x); }, -3, 3},
      {"exp", [](const Tensor& x) { return zc::exp(x); }, -5, 5},
      {"log", [](const Tensor& x) { return zc::log(x); }, 0.05, 20},
      {"sqrt", [](const Tensor& x) { return zc::sqrt(x); }, 0, 20},
      {"rsqrt", [](const Tensor& x) { return zc::rsqrt(x); }, 0.05, 20},
      {"tanh", [](const Tensor& x) { return zc::tanh(x); }, -4, 4},
      {"sigmoid", [](const Tensor& x) { return zc::sigmoid(x); }, -10, 10},
      {"relu", [](const Tensor& x) { return zc::relu(x); }, -2, 2},
      {"gelu", [](const Tensor& x) { return zc::gelu(x); }, -5, 5},
      {"gelu_tanh", [](const Tensor& x) { return zc::gelu(x, zc::GeluApprox::tanh); }, -5, 5},
      {"erf", [](const Tensor& x) { return zc::erf(x); }, -3, 3},
      {"floor", [](const Tensor& x) { return zc::floor(x); }, -4, 4},
      {"ceil", [](const Tensor& x) { return zc::ceil(x); }, -4, 4},
      {"round", [](const Tensor& x) { return zc::round(x); }, -4, 4},
      {"trunc", [](const Tensor& x) { return zc::trunc(x); }, -4, 4},
      {"sin", [](const Tensor& x) { return zc::sin(x); }, -10, 10},
      {"cos", [](const Tensor& x) { return zc::cos(x); }, -10, 10},
      {"asin", [](const Tensor& x) { return zc::asin(x); }, -0.99, 0.99},
      {"acos", [](const Tensor& x) { return zc::acos(x); }, -0.99, 0.99},
      {"atan", [](const Tensor& x) { return zc::atan(x); }, -10, 10},
      {"clamp[-0.5,0.75]", [](const Tensor& x) { return zc::clamp(x, -0.5, 0.75); }, -2, 2},
      {"clamp[-2,3]", [](const Tensor& x) { return zc::clamp(x, -2.0, 3.0); }, -4, 4},
      {"clamp[0.25,]", [](const Tensor& x) { return zc::clamp(x, 0.25, nullopt); }, -2, 2},
      {"clamp[,-0.25]", [](const Tensor& x) { return zc::clamp(x, nullopt, -0.25); }, -2, 2},
      {"clamp[,]", [](const Tensor& x) { return zc::clamp(x, nullopt, nullopt); }, -2, 2},
  };
}

TEST_F(CudaOps, Unary) {
  Harness h("unary");
  zc::manual_seed(101);
  const Shape s3{3, 4, 5};
  for (const UnaryOp& u : unary_ops()) {
    std::vector<Case> cases;
    auto add = [&](std::vector<Input> in) {
      for (Input& i : in) cases.push_back(Case(u.name, {std::move(i)}, unary_fn(u.fn)));
    };
    // Every dtype in every layout; size-1 dims and 0-dim tensors in f32 and i64.
    for (DType dt : all_dtypes()) add(every_kind(draw(s3, u.lo, u.hi, dt), dt));
    for (DType dt : {DType::f32, DType::i64}) {
      add(every_kind(draw({1, 4, 1}, u.lo, u.hi, dt), dt));
      add({contiguous(draw({}, u.lo, u.hi, dt), dt)});
    }
    // Infinities, NaN and signed zeros, whatever the domain.
    for (DType dt : {DType::f32, DType::f64, DType::f16}) {
      add({contiguous(specials(), dt), of_kind("strided", specials(), dt)});
    }
    // Large: 1 << 20 elements, packed and in three views.
    Tensor big = zc::rand({1024, 1024}) * (u.hi - u.lo) + u.lo;
    add({large("contiguous", big)});
    if (u.name == "exp" || u.name == "gelu" || u.name == "relu") {
      Tensor tall_base = zc::rand({2049, 1024}) * (u.hi - u.lo) + u.lo;
      add({large("transpose", big, [](const Tensor& b) { return b.t(); }),
           large("slice_step2", tall_base,
                 [](const Tensor& b) { return b.slice(0, 1, b.size(0), 2); }),
           large("expand", zc::rand({1, 1024}) * (u.hi - u.lo) + u.lo, [](const Tensor& b) {
             return b.expand({1024, 1024});
           })});
    }
    if (u.name == "sigmoid" || u.name == "neg") {
      add({large("contiguous", big.to(u.name == "neg" ? DType::i64 : DType::f16))});
    }
    h.run(cases);
  }
}

TEST_F(CudaOps, Cast) {
  Harness h("cast");
  zc::manual_seed(102);
  // Values every dtype can hold (no integer overflow, nothing past f16's range), with zeros
  // for the way to bool and fractions for the truncation to integers.
  Arr x = zc::ref::uniform({3, 4, 5}, -300, 300);
  const std::vector<double> edge{0.0, -0.0, 0.5, -0.999, 255.5, 1.0 / 3, -7.25, 65.0};
  for (size_t i = 0; i < edge.size(); ++i) x.v[i * 7] = edge[i];
  const Arr xb = zc::ref::small_ints({3, 4, 5}, 0, 1);
  for (DType from : all_dtypes()) {
    for (DType to : all_dtypes()) {
      const std::string op = "cast to " + name_of(to);
      const Fn fn = unary_fn([to](const Tensor& t) { return zc::cast(t, to); });
      const Arr& src = from == DType::boolean ? xb : x;
      std::vector<Case> cases;
      for (Input& i : every_kind(src, from))
        cases.push_back(Case(op, {std::move(i)}, fn, Acc::exact));
      if (from == DType::f32 || to == DType::f32) {
        cases.push_back(Case(op, {contiguous(Arr{{}, {-2.75}}, from)}, fn, Acc::exact));
      }
      // Infinities and NaN go to floating types and bool (to integers they are undefined).
      if (zc::is_floating(from) && (zc::is_floating(to) || to == DType::boolean)) {
        cases.push_back(Case(op, {contiguous(specials(), from)}, fn, Acc::exact));
      }
      h.run(cases);
    }
  }
  // Large, and the rounding of values f16 and bf16 cannot hold exactly or at all.
  Tensor big = zc::randn({1024, 1024}) * 1000.0;
  const Fn to_f16 = unary_fn([](const Tensor& t) { return zc::cast(t, DType::f16); });
  h.run("cast to f16", {large("contiguous", big)}, to_f16, Acc::exact);
  h.run("cast to f16", {large("transpose", big, [](const Tensor& b) { return b.t(); })}, to_f16,
        Acc::exact);
  h.run("cast to bf16", {large("contiguous", big)},
        unary_fn([](const Tensor& t) { return zc::cast(t, DType::bf16); }), Acc::exact);
  h.run("cast to i32", {large("contiguous", big)},
        unary_fn([](const Tensor& t) { return zc::cast(t, DType::i32); }), Acc::exact);
  h.run("cast to f32", {large("contiguous", big.to(DType::f16))},
        unary_fn([](const Tensor& t) { return zc::cast(t, DType::f32); }), Acc::exact);
  Arr wide{{6}, {70000, -70000, 65519, 65520, 3.0e38, 1.0 / 3}};
  for (DType to : {DType::f16, DType::bf16}) {
    h.run("cast to " + name_of(to), {contiguous(wide, DType::f32)},
          unary_fn([to](const Tensor& t) { return zc::cast(t, to); }), Acc::exact);
  }
  // Tensor::to(DType) is cast, and a no-op for the same dtype.
  h.run("to(f64)", {of_kind("transpose", x, DType::f32)},
        unary_fn([](const Tensor& t) { return t.to(DType::f64); }), Acc::exact);
}

// ---------------------------------------------------------------------------------------------
// Elementwise binary ops and where.

struct BinaryOp {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  double alo, ahi, blo, bhi;
  bool ties = false;  // draw small integers (comparisons, maximum, minimum)
};

std::vector<BinaryOp> binary_ops() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return zc::add(a, b); }, -3, 3, -3, 3},
      {"sub", [](const Tensor& a, const Tensor& b) { return zc::sub(a, b); }, -3, 3, -3, 3},
      {"mul", [](const Tensor& a, const Tensor& b) { return zc::mul(a, b); }, -3, 3, -3, 3},
      // The denominator has either sign; integer zeros give inf and NaN (true division).
      {"div", [](const Tensor& a, const Tensor& b) { return zc::div(a, b); }, -3, 3, -3, 3},
      // Integer bases are at least 1: 0 to a negative power is undefined as an integer.
      {"pow", [](const Tensor& a, const Tensor& b) { return zc::pow(a, b); }, 0.2, 3, -2, 2},
      {"maximum", [](const Tensor& a, const Tensor& b) { return zc::maximum(a, b); }, -3, 3, -3, 3,
       true},
      {"minimum", [](const Tensor& a, const Tensor& b) { return zc::minimum(a, b); }, -3, 3, -3, 3,
       true},
      // As div's: divisors of either sign; integer zeros give 0.
      {"fmod", [](const Tensor& a, const Tensor& b) { return zc::fmod(a, b); }, -7, 7, -3, 3},
      {"remainder", [](const Tensor& a, const Tensor& b) { return zc::remainder(a, b); }, -7, 7, -3,
       3},
      {"eq", [](const Tensor& a, const Tensor& b) { return zc::eq(a, b); }, -2, 2, -2, 2, true},
      {"ne", [](const Tensor& a, const Tensor& b) { return zc::ne(a, b); }, -2, 2, -2, 2, true},
      {"lt", [](const Tensor& a, const Tensor& b) { return zc::lt(a, b); }, -2, 2, -2, 2, true},
      {"le", [](const Tensor& a, const Tensor& b) { return zc::le(a, b); }, -2, 2, -2, 2, true},
      {"gt", [](const Tensor& a, const Tensor& b) { return zc::gt(a, b); }, -2, 2, -2, 2, true},
      {"ge", [](const Tensor& a, const Tensor& b) { return zc::ge(a, b); }, -2, 2, -2, 2, true},
  };
}

Arr draw_a(const BinaryOp& op, const Shape& s, DType dt) {
  if (op.ties && dt != DType::boolean) return draw(s, op.alo, op.ahi, DType::i64);  // exact
  return draw(s, op.alo, op.ahi, dt);
}

Arr draw_b(const BinaryOp& op, const Shape& s, DType dt) {
  if (op.ties && dt != DType::boolean) return draw(s, op.blo, op.bhi, DType::i64);
  Arr b = draw(s, op.blo, op.bhi, dt);
  const bool divisor = op.name == "div" || op.name == "fmod" || op.name == "remainder";
  if (divisor && zc::is_floating(dt)) {  // away from zero, either sign
    for (double& v : b.v) v = v < 0 ? v - 0.5 : v + 0.5;
  }
  return b;
}

// Pairs of operands over every input kind: the kinds of `a` and of `b` rotate against each
// other, so each kind of each side appears without the full cross product.

TEST_F(CudaOps, Binary) {
  Harness h("binary");
  zc::manual_seed(201);
  const Shape s3{3, 4, 5};
  for (const BinaryOp& op : binary_ops()) {
    std::vector<Case> cases;
    auto add = [&](Input a, Input b) {
      cases.push_back(Case(op.name, {std::move(a), std::move(b)}, binary_fn(op.fn)));
    };
    for (DType dt : all_dtypes()) {
      // Same shapes; both operands broadcasting ([3,1,5] with [4,1]); a stride-0 operand.
      for (auto& [a, b] : kind_pairs(draw_a(op, s3, dt), draw_b(op, s3, dt), dt, dt)) add(a, b);
      for (auto& [a, b] : kind_pairs(draw_a(op, {3, 1, 5}, dt), draw_b(op, {4, 1}, dt), dt, dt)) {
        add(a, b);
      }
      add(contiguous(draw_a(op, s3, dt), dt), expanded(draw_b(op, {1, 4, 1}, dt), s3, dt));
    }
    for (DType dt : {DType::f32, DType::i64}) {
      // The first operand broadcast; 0-dim tensors on the device on either side; size-1 dims.
      add(of_kind("transpose", draw_a(op, {4, 5}, dt), dt),
          of_kind("permute", draw_b(op, s3, dt), dt));
      add(contiguous(draw_a(op, {}, dt), dt), of_kind("strided", draw_b(op, s3, dt), dt));
      add(of_kind("column_major", draw_a(op, s3, dt), dt), contiguous(draw_b(op, {}, dt), dt));
      add(contiguous(draw_a(op, {}, dt), dt), contiguous(draw_b(op, {}, dt), dt));
      add(of_kind("strided", draw_a(op, {1, 4, 1}, dt), dt),
          contiguous(draw_b(op, {1, 1, 1}, dt), dt));
    }
    // NaN, infinities and signed zeros against each other.
    Arr sa = specials(), sb = specials();
    std::rotate(sb.v.begin(), sb.v.begin() + 3, sb.v.end());
    for (DType dt : {DType::f32, DType::f16}) add(contiguous(sa, dt), of_kind("strided", sb, dt));
    // Large: 1 << 20 elements against a broadcast row, packed and in two views.
    const double lo = op.alo, span = op.ahi - op.alo;
    Tensor big = zc::rand({1024, 1024}) * span + lo, tall_base = zc::rand({2049, 1024}) * span + lo;
    Tensor row = zc::rand({1024}) * (op.bhi - op.blo) + op.blo;
    if (op.ties) {  // few distinct values, so that comparisons tie
      big = (big * 2.0).to(DType::i64).to(DType::f32);
      tall_base = (tall_base * 2.0).to(DType::i64).to(DType::f32);
      row = (row * 2.0).to(DType::i64).to(DType::f32);
    }
    if (op.name == "div" || op.name == "fmod" || op.name == "remainder") row = row + 3.5;
    add(large("contiguous", big), large("contiguous", row));
    add(large("transpose", big, [](const Tensor& b) { return b.t(); }), large("contiguous", row));
    add(large("slice_step2", tall_base,
              [](const Tensor& b) { return b.slice(0, 1, b.size(0), 2); }),
        large("contiguous", row));
    h.run(cases);
  }
}

TEST_F(CudaOps, BinaryPromotionAndNumbers) {
  Harness h("binary promotion and numbers");
  zc::manual_seed(202);
  const Shape s3{3, 4, 5};
  // Mixed dtypes: the promoted type and its values; each pair in one order, alternating.
  const std::vector<std::pair<DType, DType>> pairs{
      {DType::f32, DType::f64},  {DType::bf16, DType::f16},    {DType::i32, DType::f16},
      {DType::f32, DType::i64},  {DType::boolean, DType::i32}, {DType::i64, DType::i32},
      {DType::bf16, DType::f32}, {DType::f64, DType::boolean}};
  for (const BinaryOp& op : binary_ops()) {
    for (const auto& [da, db] : pairs) {
      Arr a = draw_a(op, {3, 1, 5}, zc::is_floating(da) ? da : DType::i64);
      Arr b = draw_b(op, {4, 1}, zc::is_floating(db) ? db : DType::i64);
      if (da == DType::boolean) a = zc::ref::small_ints(a.shape, 0, 1);
      if (db == DType::boolean) b = zc::ref::small_ints(b.shape, 0, 1);
      h.run(op.name, {of_kind("column_major", a, da), of_kind("slice_step2", b, db)},
            binary_fn(op.fn));
    }
    // Numbers on either side of an f32 tensor: integral and fractional C++ numbers, 0-dim CPU
    // tensors of another dtype.
    Arr x = draw_a(op, s3, DType::f32);
    for (Input& xi : every_kind(x, DType::f32)) {
      h.run(op.name, {xi, number(2.0)}, binary_fn(op.fn));
      h.run(op.name, {xi, number(0.5)}, binary_fn(op.fn));
      h.run(op.name, {number(2.5), xi}, binary_fn(op.fn));
      h.run(op.name, {xi, cpu_scalar(1.5, DType::f64)}, binary_fn(op.fn));
      h.run(op.name, {cpu_scalar(2, DType::i64), xi}, binary_fn(op.fn));
    }
  }
  // The operators and scalar overloads as written in user code, on every dtype.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> forms{
      {"x * 2.0", [](const Tensor& x) { return x * 2.0; }},
      {"x + 2.5", [](const Tensor& x) { return x + 2.5; }},
      {"2.0 - x", [](const Tensor& x) { return 2.0 - x; }},
      {"1.5 / x", [](const Tensor& x) { return 1.5 / x; }},
      {"x / 4.0", [](const Tensor& x) { return x / 4.0; }},
      {"-x", [](const Tensor& x) { return -x; }},
      {"pow(x, 2.0)", [](const Tensor& x) { return zc::pow(x, 2.0); }},
      {"pow(x, 0.5)", [](const Tensor& x) { return zc::pow(x, 0.5); }},
      {"maximum(x, 0.25)", [](const Tensor& x) { return zc::maximum(x, 0.25); }},
      {"minimum(x, -1.0)", [](const Tensor& x) { return zc::minimum(x, -1.0); }},
      {"fmod(x, 2.0)", [](const Tensor& x) { return zc::fmod(x, 2.0); }},
      {"remainder(x, -1.5)", [](const Tensor& x) { return zc::remainder(x, -1.5); }},
      {"ge(x, 1.0)", [](const Tensor& x) { return zc::ge(x, 1.0); }},
      {"ne(x, 0.5)", [](const Tensor& x) { return zc::ne(x, 0.5); }},
  };
  for (const auto& [name, f] : forms) {
    for (DType dt : all_dtypes()) {
      Arr x = ties(s3, dt);
      h.run(name, {of_kind("transpose", x, dt)}, unary_fn(f));
    }
  }
  // Tensor operators between two device tensors, and numbers with a 0-dim device tensor.
  Arr a = zc::ref::uniform(s3, -2, 2), b = zc::ref::uniform({5}, 0.5, 2);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>>
      ops{{"a + b", [](const Tensor& p, const Tensor& q) { return p + q; }},
          {"a - b", [](const Tensor& p, const Tensor& q) { return p - q; }},
          {"a * b", [](const Tensor& p, const Tensor& q) { return p * q; }},
          {"a / b", [](const Tensor& p, const Tensor& q) { return p / q; }},
          {"(a + 1) * (b - 1)",
           [](const Tensor& p, const Tensor& q) { return (p + 1.0) * (q - 1.0); }}};
  for (const auto& [name, f] : ops) {
    h.run(name, {of_kind("permute", a, DType::f32), of_kind("strided", b, DType::f32)},
          binary_fn(f));
  }
  h.run("0-dim * 0.5", {contiguous(Arr{{}, {3.0}}, DType::f32)},
        unary_fn([](const Tensor& t) { return t * 0.5; }));
  h.run("0-dim i32 + 2.5", {contiguous(Arr{{}, {3.0}}, DType::i32)},
        unary_fn([](const Tensor& t) { return t + 2.5; }));

  // A tensor with dims on the CPU does not mix with a CUDA tensor.
  if (!dry_run()) {
    Tensor g = zc::ones({3}).to(Device::cuda(0));
    EXPECT_THROW(zc::add(g, zc::ones({3})), zc::Error);
    EXPECT_THROW(zc::add(zc::ones({1}), g), zc::Error);
    EXPECT_THROW(zc::where(zc::ones({3}, DType::boolean), g, g), zc::Error);
  }
}

TEST_F(CudaOps, Where) {
  Harness h("where");
  zc::manual_seed(301);
  const Fn where = [](const std::vector<Tensor>& v) { return zc::where(v[0], v[1], v[2]); };
  const Arr c = zc::ref::small_ints({3, 1}, 0, 1);
  for (DType dt : all_dtypes()) {
    // Integers in [-8, 8] (exact in every dtype); the condition broadcasts along rows, `a`
    // along columns.
    Arr a = zc::ref::small_ints({1, 4}, -8, 8), b = zc::ref::small_ints({3, 4}, -8, 8);
    if (dt == DType::boolean) {
      a = zc::ref::small_ints({1, 4}, 0, 1);
      b = zc::ref::small_ints({3, 4}, 0, 1);
    }
    std::vector<Input> cs = every_kind(c, DType::boolean), as = every_kind(a, dt),
                       bs = every_kind(b, dt);
    for (size_t i = 0; i < bs.size(); ++i) {
      h.run("where", {cs[i % cs.size()], as[(i + 1) % as.size()], bs[i]}, where, Acc::exact);
    }
  }
  // A condition computed on the device; a number and a 0-dim CPU tensor as the other branch;
  // mixed dtypes promote.
  const Arr x = zc::ref::uniform({3, 4, 5}, -1, 1);
  const Fn relu_like = [](const std::vector<Tensor>& v) {
    return zc::where(zc::gt(v[0], 0.0), v[0], v[1]);
  };
  for (Input& xi : every_kind(x, DType::f32)) {
    h.run("where(gt(x, 0), x, y)", {xi, number(-1.0)}, relu_like, Acc::exact);
    h.run("where(gt(x, 0), x, y)", {xi, cpu_scalar(0.5, DType::f64)}, relu_like, Acc::exact);
  }
  h.run("where",
        {of_kind("strided", zc::ref::small_ints({3, 4, 5}, 0, 1), DType::boolean),
         of_kind("transpose", x, DType::f16), contiguous(zc::ref::uniform({5}, -1, 1), DType::f32)},
        where, Acc::exact);
  h.run("where",
        {contiguous(Arr{{}, {1}}, DType::boolean), contiguous(Arr{{}, {2.5}}, DType::f32),
         of_kind("column_major", x, DType::f32)},
        where, Acc::exact);
  // Large: a column condition against 1 << 20 elements.
  Tensor big = zc::randn({1024, 1024}), cond = zc::gt(zc::rand({1024, 1}), zc::scalar_tensor(0.5));
  h.run("where",
        {large("contiguous", cond), large("transpose", big, [](const Tensor& t) { return t.t(); }),
         large("contiguous", zc::zeros({1024}))},
        where, Acc::exact);
}

// Rounding and the remainders on every pair of their edge values (a [n, 1] against b [1, m]):
// NaN, infinities, signed zeros, halves, operands of each sign, divisors of 0 and, for
// integers, the extremes (the most negative value by -1). Each result is exact in IEEE
// arithmetic, so the devices agree to the bit, the sign of every zero included (the harness's
// comparison takes -0 for 0).
TEST_F(CudaOps, RoundingAndRemaindersAtEdgeValuesEqualTheCpuToTheBit) {
  const double inf = INFINITY, nan = NAN;
  const std::vector<double> fa{nan, inf, -inf, -0.0, 0.0, 0.5,  1.5,   2.5,  -0.5, -2.5,
                               5,   -5,  5.5,  -5.5, -6,  0.75, 1e-30, -7e5, 1e20, 3.0e38};
  const std::vector<double> fb{3, -3, 2, -0.25, 0, -0.0, inf, -inf, nan, 1e-3, -1e20};
  // Integers, with -8 and 8 standing for the dtype's extremes.
  auto ints = [](std::vector<int64_t> v, DType dt) {
    const bool i32 = dt == DType::i32;
    for (int64_t& x : v) {
      if (x == -8)
        x = i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
      if (x == 8)
        x = i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
    }
    const Shape s{static_cast<int64_t>(v.size())};
    return i32 ? zc::from_values(std::vector<int32_t>(v.begin(), v.end()), s)
               : zc::from_values(v, s);
  };
  auto column = [](const Tensor& t) { return t.reshape({t.numel(), 1}); };
  auto row = [](const Tensor& t) { return t.reshape({1, t.numel()}); };
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>>
      ops{{"floor", [](const Tensor& a, const Tensor&) { return zc::floor(a); }},
          {"ceil", [](const Tensor& a, const Tensor&) { return zc::ceil(a); }},
          {"round", [](const Tensor& a, const Tensor&) { return zc::round(a); }},
          {"trunc", [](const Tensor& a, const Tensor&) { return zc::trunc(a); }},
          {"fmod", [](const Tensor& a, const Tensor& b) { return zc::fmod(a, b); }},
          {"remainder", [](const Tensor& a, const Tensor& b) { return zc::remainder(a, b); }}};
  int compared = 0;
  for (DType dt : all_dtypes()) {
    if (dt == DType::boolean) continue;  // no remainders; rounding is the identity
    Tensor a, b;
    if (zc::is_floating(dt)) {
      a = column(zc::from_values(fa, {static_cast<int64_t>(fa.size())}).to(dt));
      b = row(zc::from_values(fb, {static_cast<int64_t>(fb.size())}).to(dt));
    } else {
      a = column(ints({7, -7, 0, 1, -1, 6, -8, 8}, dt));
      b = row(ints({3, -3, 0, -1, 1, 7, -8}, dt));
    }
    const Tensor ad = a.to(test_device()), bd = b.to(test_device());
    for (const auto& [name, fn] : ops) {
      SCOPED_TRACE(name + " " + name_of(dt));
      const Tensor want = fn(a, b), got = fn(ad, bd).to(Device::cpu());
      ASSERT_EQ(got.dtype(), want.dtype());
      ASSERT_EQ(got.shape(), want.shape());
      if (!zc::is_floating(dt)) {
        const Tensor g = got.to(DType::i64).contiguous(), w = want.to(DType::i64).contiguous();
        for (int64_t i = 0; i < g.numel(); ++i) {
          EXPECT_EQ(g.data<int64_t>()[i], w.data<int64_t>()[i]) << "element " << i;
        }
      } else {
        const std::vector<double> g = values(got), w = values(want);
        for (size_t i = 0; i < g.size(); ++i) {
          const bool same = std::isnan(w[i])
                                ? std::isnan(g[i])
                                : g[i] == w[i] && std::signbit(g[i]) == std::signbit(w[i]);
          EXPECT_TRUE(same) << "element " << i << ": CUDA " << g[i] << ", the CPU " << w[i];
        }
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 36);
}

}  // namespace
}  // namespace cuda_ops_test
