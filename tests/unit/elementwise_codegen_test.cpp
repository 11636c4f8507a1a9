// Every elementwise op exists twice: an eager functor and a C expression (ops/elementwise.h).
// Here both run on every dtype: one graph per dtype applies every elementwise op the registry
// has (with each attribute variant) to the same inputs; the generated code's results must
// equal the eager kernels' exactly for integers and bools, and to a tolerance for floats (the
// generated exp and tanh in float are within 2 ulp; the compiler may contract a*b+c).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codegen/backends/cpp/backend.h"
#include "codegen/backends/eager/interpreter.h"
#include "runtime/driver/compile_graph.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16,    DType::bf16,
                             DType::i64, DType::i32, DType::boolean};

// Eight values of dtype t: negative, zero and positive; halves for floats; small integers
// for pow's exponent (`exponent`), so that integer powers stay representable.
Tensor values(DType t, bool exponent) {
  std::vector<double> v = exponent ? std::vector<double>{0, 1, 2, 3, 1, 2, 0, 3}
                                   : std::vector<double>{-3, -2, -1, 0, 1, 2, 3, 4};
  if (is_floating(t) && !exponent) v = {-2.5, -1, -0.5, 0, 0.5, 1, 2.5, 3.75};
  std::vector<double> data(v.begin(), v.end());
  return from_values(data, {2, 4}).to(t);
}

// Attribute variants worth a node each.
std::vector<ops::Attrs> variants(ops::OpId op) {
  switch (op) {
    case ops::OpId::gelu:
      return {ops::GeluAttrs{GeluApprox::none}, ops::GeluAttrs{GeluApprox::tanh}};
    case ops::OpId::clamp:
      return {ops::ClampAttrs{-0.5, 1.5}, ops::ClampAttrs{std::nullopt, 2.0},
              ops::ClampAttrs{-1.0, std::nullopt}};
    case ops::OpId::cast: {
      std::vector<ops::Attrs> out;
      for (DType t : kDTypes) out.push_back(ops::CastAttrs{t});
      return out;
    }
    default:
      return {ops::NoAttrs{}};
  }
}

struct Program {
  ir::Graph graph;
  std::vector<std::string> labels;  // per output
};

// Inputs: a, b (pow-friendly), cond (bool); one node per op and attribute variant the op
// accepts on inputs of dtype t.
Program every_elementwise_op(DType t) {
  Program p;
  ir::Graph& g = p.graph;
  auto input = [&](DType dt) {
    ir::ValueId v = g.add_value(ops::TensorMeta{{2, 4}, dt, Device::cpu()});
    g.inputs.push_back(ir::Input{v, ir::InputKind::user});
    return v;
  };
  ir::ValueId a = input(t), b = input(t), cond = input(DType::boolean);
  for (int i = 0; i < ops::kNumOps; ++i) {
    ops::OpId op = static_cast<ops::OpId>(i);
    if (!ops::is_elementwise(op)) continue;
    const ops::OpDef& def = ops::op_def(op);
    std::vector<ir::ValueId> args;
    if (def.max_inputs == 1) args = {a};
    if (def.max_inputs == 2) args = {a, b};
    if (def.max_inputs == 3) args = {cond, a, b};
    for (const ops::Attrs& attrs : variants(op)) {
      std::vector<ops::TensorMeta> metas;
      for (ir::ValueId v : args) metas.push_back(g.meta(v));
      std::vector<ops::TensorMeta> outs;
      try {
        outs = ops::infer_outputs(def, metas, attrs);
      } catch (const Error&) {
        continue;  // the op refuses this dtype (neg and sub of bool)
      }
      ir::Node n{op, attrs, args, {}, ir::kNoRegion};
      n.outputs.push_back(g.add_value(outs[0], static_cast<int32_t>(g.nodes.size())));
      g.outputs.push_back(n.outputs[0]);
      g.nodes.push_back(std::move(n));
      p.labels.push_back(std::string(def.name) + " " + ops::attrs_str(attrs));
    }
  }
  return p;
}

// Equal as the dtype demands: exactly for integers and bools, within `tol` relative for
// floats, NaN where the other is NaN.
bool same_values(const Tensor& got, const Tensor& want, double tol, std::string* why) {
  Tensor g = got.to(DType::f64).contiguous(), w = want.to(DType::f64).contiguous();
  const double* gp = g.data<double>();
  const double* wp = w.data<double>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    bool ok = (std::isnan(gp[i]) && std::isnan(wp[i])) || gp[i] == wp[i] ||
              std::abs(gp[i] - wp[i]) <= tol * std::max(1.0, std::abs(wp[i]));
    if (!ok) {
      *why = "element " + std::to_string(i) + ": generated " + std::to_string(gp[i]) + ", eager " +
             std::to_string(wp[i]);
      return false;
    }
  }
  return true;
}

TEST(ElementwiseCodegen, EveryOpOnEveryDtypeEqualsItsEagerKernel) {
  auto backend = codegen::cpp::make_cpp_backend();
  int nodes = 0;
  for (DType t : kDTypes) {
    Program p = every_elementwise_op(t);
    std::vector<Tensor> in = {
        values(t, false), values(t, true),
        from_values<int32_t>({1, 0, 0, 1, 1, 1, 0, 0}, {2, 4}).to(DType::boolean)};
    std::vector<const Tensor*> args;
    for (const Tensor& x : in) args.push_back(&x);
    std::vector<Tensor> want = codegen::eager::interpret(p.graph, args);
    runtime::CompileContext no_cache(nullptr);
    std::vector<Tensor> got = runtime::build_executable(p.graph, *backend, no_cache)->run(args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string what = std::string(dtype_name(t)) + ": " + p.labels[i];
      ASSERT_EQ(got[i].dtype(), want[i].dtype()) << what;
      DType out = want[i].dtype();
      // One unit in the last place of the stored type: the generated float exp and tanh may
      // round a result to the neighbouring 16-bit value.
      double tol = out == DType::f16 ? 1e-3 : out == DType::bf16 ? 8e-3 : 1e-5;
      std::string why;
      EXPECT_TRUE(same_values(got[i], want[i], tol, &why)) << what << ": " << why;
    }
    nodes += static_cast<int>(got.size());
  }
  // Every elementwise op took part on at least one dtype.
  EXPECT_GT(nodes, 7 * 25);
}

// Equal to the bit but for NaN's payload: the sign of a zero counts.
bool same_bits(const Tensor& got, const Tensor& want, std::string* why) {
  if (!is_floating(want.dtype())) {
    Tensor g = got.to(DType::i64).contiguous(), w = want.to(DType::i64).contiguous();
    for (int64_t i = 0; i < g.numel(); ++i) {
      if (g.data<int64_t>()[i] == w.data<int64_t>()[i]) continue;
      *why = "element " + std::to_string(i) + ": generated " +
             std::to_string(g.data<int64_t>()[i]) + ", eager " +
             std::to_string(w.data<int64_t>()[i]);
      return false;
    }
    return true;
  }
  Tensor g = got.to(DType::f64).contiguous(), w = want.to(DType::f64).contiguous();
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double x = g.data<double>()[i], y = w.data<double>()[i];
    if (std::isnan(y) ? std::isnan(x) : x == y && std::signbit(x) == std::signbit(y)) continue;
    *why = "element " + std::to_string(i) + ": generated " + std::to_string(x) + ", eager " +
           std::to_string(y);
    return false;
  }
  return true;
}

// Rounding, sin, cos and the remainders on every pair of their edge values (a [n, 1] against b
// [1, m]): NaN, infinities, signed zeros, halves, operands of each sign, divisors of 0 and,
// for integers, the extremes (the most negative value by -1). The generated code calls the
// same C library functions as the eager kernels, so the results agree to the bit.
TEST(ElementwiseCodegen, RoundingTrigAndRemaindersAtEdgeValuesEqualEagerToTheBit) {
  auto backend = codegen::cpp::make_cpp_backend();
  const double inf = INFINITY, nan = NAN;
  const std::vector<double> fa{nan, inf, -inf, -0.0, 0.0, 0.5,  1.5,   2.5,      -0.5, -2.5,
                               5,   -5,  5.5,  -5.5, -6,  0.75, 1e-30, 123456.7, -7e5, 1e20};
  const std::vector<double> fb{3, -3, 2, -0.25, 0, -0.0, inf, -inf, nan, 1e-3, -1e20};
  const std::vector<int64_t> ia{
      7, -7, 0, 1, -1, 6, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  const std::vector<int64_t> ib{3, -3, 0, -1, 1, 7, std::numeric_limits<int64_t>::min()};
  const std::vector<int32_t> ja{
      7, -7, 0, 1, -1, 6, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  const std::vector<int32_t> jb{3, -3, 0, -1, 1, 7, std::numeric_limits<int32_t>::min()};
  const ops::OpId unary[] = {ops::OpId::floor, ops::OpId::ceil, ops::OpId::round,
                             ops::OpId::trunc, ops::OpId::sin,  ops::OpId::cos};
  const ops::OpId binary[] = {ops::OpId::fmod, ops::OpId::remainder};
  for (DType t : kDTypes) {
    SCOPED_TRACE(dtype_name(t));
    Tensor a, b;
    if (t == DType::i64) {
      a = from_values(ia, {static_cast<int64_t>(ia.size()), 1});
      b = from_values(ib, {1, static_cast<int64_t>(ib.size())});
    } else if (t == DType::i32) {
      a = from_values(ja, {static_cast<int64_t>(ja.size()), 1});
      b = from_values(jb, {1, static_cast<int64_t>(jb.size())});
    } else if (t == DType::boolean) {
      a = from_values<int32_t>({1, 0}, {2, 1}).to(t);
      b = from_values<int32_t>({1, 0, 1}, {1, 3}).to(t);
    } else {
      a = from_values(fa, {static_cast<int64_t>(fa.size()), 1}).to(t);
      b = from_values(fb, {1, static_cast<int64_t>(fb.size())}).to(t);
    }
    ir::Graph g;
    std::vector<std::string> labels;
    auto input = [&](const Tensor& x) {
      ir::ValueId v = g.add_value(ops::meta_of(x));
      g.inputs.push_back(ir::Input{v, ir::InputKind::user});
      return v;
    };
    const ir::ValueId va = input(a), vb = input(b);
    auto node = [&](ops::OpId op, std::vector<ir::ValueId> args) {
      std::vector<ops::TensorMeta> metas;
      for (ir::ValueId v : args) metas.push_back(g.meta(v));
      std::vector<ops::TensorMeta> outs;
      try {
        outs = ops::infer_outputs(ops::op_def(op), metas, ops::NoAttrs{});
      } catch (const Error&) {
        return;  // the remainders of bools
      }
      ir::Node n{op, ops::NoAttrs{}, args, {}, ir::kNoRegion};
      n.outputs.push_back(g.add_value(outs[0], static_cast<int32_t>(g.nodes.size())));
      g.outputs.push_back(n.outputs[0]);
      g.nodes.push_back(std::move(n));
      labels.emplace_back(ops::op_def(op).name);
    };
    for (ops::OpId op : unary) node(op, {va});
    for (ops::OpId op : binary) node(op, {va, vb});
    std::vector<const Tensor*> args{&a, &b};
    std::vector<Tensor> want = codegen::eager::interpret(g, args);
    runtime::CompileContext no_cache(nullptr);
    std::vector<Tensor> got = runtime::build_executable(g, *backend, no_cache)->run(args);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(got.size(), t == DType::boolean ? 6u : 8u);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].dtype(), want[i].dtype()) << labels[i];
      std::string why;
      EXPECT_TRUE(same_bits(got[i], want[i], &why)) << labels[i] << ": " << why;
    }
  }
}

}  // namespace
}  // namespace zc
