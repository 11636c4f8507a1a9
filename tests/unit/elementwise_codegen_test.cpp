// Every elementwise op exists twice: an eager functor and a C expression (ops/elementwise.h).
// Here both run on every dtype: one graph per dtype applies every elementwise op the registry
// has (with each attribute variant) to the same inputs; the generated code's results must
// equal the eager kernels' exactly for integers and bools, and to a tolerance for floats (the
// generated exp and tanh in float are within 2 ulp; the compiler may contract a*b+c).
#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace zc
