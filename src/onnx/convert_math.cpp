// Elementwise operators, products, reductions, softmax and casts. ONNX broadcasts as numpy
// does, as zc's elementwise ops do.
#include <algorithm>
#include <cmath>

#include "onnx/convert.h"
#include "onnx/onnx_file.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

template <Tensor (*F)(const Tensor&, const Tensor&)>
V binary(const NodeArgs& a) {
  return {F(a.in(0), a.in(1))};
}

template <Tensor (*F)(const Tensor&)>
V unary(const NodeArgs& a) {
  return {F(a.in(0))};
}

// Integer division truncates, as ONNX (and C) define it; floats divide.
V divide(const NodeArgs& a) {
  const Tensor &x = a.in(0), &y = a.in(1);
  if (is_integral(x.dtype()) && is_integral(y.dtype())) {
    return {cast(div(cast(x, DType::f64), cast(y, DType::f64)), x.dtype())};
  }
  return {div(x, y)};
}

// fmod=1: the dividend's sign (C's fmod); 0, the default: the divisor's (Python's %).
V mod(const NodeArgs& a) {
  const Tensor &x = a.in(0), &y = a.in(1);
  return {a.i("fmod", 0) ? fmod(x, y) : remainder(x, y)};
}

V reciprocal(const NodeArgs& a) {
  return {1.0 / a.in(0)};
}

V gelu_op(const NodeArgs& a) {
  const std::string approx = a.s("approximate", "none");
  if (approx != "none" && approx != "tanh") throw a.error("approximate '" + approx + "'");
  return {gelu(a.in(0), approx == "tanh" ? GeluApprox::tanh : GeluApprox::none)};
}

V mat_mul(const NodeArgs& a) {
  return {matmul(a.in(0), a.in(1))};
}

// alpha * A' B' + beta * C: a Linear layer when B is transposed and the scales are 1.
V gemm(const NodeArgs& a) {
  const Tensor &x = a.in(0), &w = a.in(1);
  if (x.dim() != 2 || w.dim() != 2) throw a.error("A and B must be 2-D");
  const double alpha = a.f("alpha", 1.0f), beta = a.f("beta", 1.0f);
  const bool ta = a.i("transA", 0) != 0, tb = a.i("transB", 0) != 0;
  if (!ta && tb && alpha == 1.0 && (beta == 1.0 || !a.has(2))) {
    const Tensor& c = a.has(2) ? a.in(2) : Tensor();
    if (!c.defined() || (c.dim() == 1 && c.size(0) == w.size(0))) return {linear(x, w, c)};
  }
  Tensor y = matmul(ta ? x.t() : x, tb ? w.t() : w);
  if (alpha != 1.0) y = y * alpha;
  if (a.has(2)) y = y + (beta == 1.0 ? a.in(2) : a.in(2) * beta);
  return {y};
}

V softmax_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {softmax(x, a.axis(a.i("axis", -1), x.dim()))};
}

V log_softmax_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {log_softmax(x, a.axis(a.i("axis", -1), x.dim()))};
}

// The axes of a reduction: the attribute (ReduceMean, Max, Min before opset 18) or the second
// input (ReduceSum from 13); none means every axis, unless noop_with_empty_axes.
template <Tensor (*F)(const Tensor&, const std::vector<int64_t>&, bool)>
V reduce(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  std::vector<int64_t> axes = a.has(1) ? a.values(1, "axes") : a.ints("axes");
  const bool keep = a.i("keepdims", 1) != 0;
  if (axes.empty()) {
    if (a.i("noop_with_empty_axes", 0) != 0) return {x};
    for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
  }
  for (int64_t& d : axes) d = a.axis(d, x.dim());
  return {F(x, axes, keep)};
}

// The reductions ONNX names beyond sum, mean, max and min, as their compositions.
Tensor reduce_l1(const Tensor& x, const std::vector<int64_t>& dims, bool keep) {
  return sum(abs(x), dims, keep);
}
Tensor reduce_l2(const Tensor& x, const std::vector<int64_t>& dims, bool keep) {
  return sqrt(sum(x * x, dims, keep));
}
Tensor reduce_sum_square(const Tensor& x, const std::vector<int64_t>& dims, bool keep) {
  return sum(x * x, dims, keep);
}
Tensor reduce_log_sum(const Tensor& x, const std::vector<int64_t>& dims, bool keep) {
  return log(sum(x, dims, keep));
}
// log(sum(exp(x))) shifted by the maximum, so that no exp overflows.
Tensor reduce_log_sum_exp(const Tensor& x, const std::vector<int64_t>& dims, bool keep) {
  const Tensor m = amax(x, dims, true);
  return log(sum(exp(x - m), dims, keep)) + (keep ? m : amax(x, dims, false));
}

// The first index of the maximum (ArgMax) or minimum (ArgMin) along `axis`, as i64.
template <bool Min>
V arg_extreme(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (a.i("select_last_index", 0) != 0) {
    throw a.error("select_last_index 1 (the last of equal extremes) is not supported");
  }
  const int64_t axis = a.axis(a.i("axis", 0), x.dim());
  return {argmax(Min ? -x : x, axis, a.i("keepdims", 1) != 0)};
}

V where_op(const NodeArgs& a) {
  return {where(a.in(0), a.in(1), a.in(2))};
}

V not_op(const NodeArgs& a) {
  return {where(a.in(0), full({}, 0, DType::boolean), full({}, 1, DType::boolean))};
}
V and_op(const NodeArgs& a) {
  return {where(a.in(0), a.in(1), full({}, 0, DType::boolean))};
}
V or_op(const NodeArgs& a) {
  return {where(a.in(0), full({}, 1, DType::boolean), a.in(1))};
}

// Min, Max, Sum over any number of inputs.
template <Tensor (*F)(const Tensor&, const Tensor&)>
V variadic(const NodeArgs& a) {
  Tensor y = a.in(0);
  for (size_t i = 1; i < a.count(); ++i) y = F(y, a.in(i));
  return {y};
}

V clip(const NodeArgs& a) {
  std::optional<double> lo, hi;
  if (a.has(1)) lo = a.scalar(1, "min");
  if (a.has(2)) hi = a.scalar(2, "max");
  return {clamp(a.in(0), lo, hi)};
}

V cast_op(const NodeArgs& a) {
  const DType to = onnx_file::dtype_of(static_cast<int32_t>(a.i("to", 1)), "Cast's 'to'");
  const Tensor& x = a.in(0);
  if (x.dtype() == to) return {x};
  return {x.is_traced() ? cast(x, to) : x.to(to)};
}

V identity(const NodeArgs& a) {
  return {a.in(0)};
}

// Inference: the input itself. A mask output or training mode cannot be served.
V dropout_op(const NodeArgs& a) {
  if (a.outputs() > 1) throw a.error("its mask output is not supported (inference only)");
  if (a.has(2) && a.scalar(2, "training_mode") != 0)
    throw a.error("training_mode is not supported");
  return {a.in(0)};
}

}  // namespace

void add_math_rules(std::vector<OpRule>& r) {
  r.push_back({"Add", binary<add>, {}});
  r.push_back({"Sub", binary<sub>, {}});
  r.push_back({"Mul", binary<mul>, {}});
  r.push_back({"Div", divide, {}});
  r.push_back({"Pow", binary<pow>, {}});
  r.push_back({"Equal", binary<eq>, {}});
  r.push_back({"Less", binary<lt>, {}});
  r.push_back({"LessOrEqual", binary<le>, {}});
  r.push_back({"Greater", binary<gt>, {}});
  r.push_back({"GreaterOrEqual", binary<ge>, {}});
  r.push_back({"Min", variadic<minimum>, {}});
  r.push_back({"Max", variadic<maximum>, {}});
  r.push_back({"Sum", variadic<add>, {}});
  r.push_back({"Not", not_op, {}});
  r.push_back({"And", and_op, {}});
  r.push_back({"Or", or_op, {}});
  r.push_back({"Where", where_op, {}});
  r.push_back({"Relu", unary<relu>, {}});
  r.push_back({"Sigmoid", unary<sigmoid>, {}});
  r.push_back({"Tanh", unary<tanh>, {}});
  r.push_back({"Erf", unary<erf>, {}});
  r.push_back({"Exp", unary<exp>, {}});
  r.push_back({"Log", unary<log>, {}});
  r.push_back({"Sqrt", unary<sqrt>, {}});
  r.push_back({"Neg", unary<neg>, {}});
  r.push_back({"Abs", unary<abs>, {}});
  r.push_back({"Reciprocal", reciprocal, {}});
  r.push_back({"Floor", unary<floor>, {}});
  r.push_back({"Ceil", unary<ceil>, {}});
  r.push_back({"Round", unary<round>, {}});  // halves to even, as ONNX says
  r.push_back({"Sin", unary<sin>, {}});
  r.push_back({"Cos", unary<cos>, {}});
  r.push_back({"Asin", unary<asin>, {}});
  r.push_back({"Acos", unary<acos>, {}});
  r.push_back({"Atan", unary<atan>, {}});
  r.push_back({"Mod", mod, {"fmod"}});
  r.push_back({"Gelu", gelu_op, {"approximate"}});
  r.push_back({"MatMul", mat_mul, {}});
  r.push_back({"Gemm", gemm, {"alpha", "beta", "transA", "transB"}});
  r.push_back({"Softmax", softmax_op, {"axis"}});
  r.push_back({"LogSoftmax", log_softmax_op, {"axis"}});
  r.push_back({"ReduceSum", reduce<sum>, {"keepdims", "noop_with_empty_axes"}, {1}});
  // From opset 18 every reduction takes its axes as an input, and noop_with_empty_axes.
  const std::vector<std::string_view> reduce_attrs{"axes", "keepdims", "noop_with_empty_axes"};
  r.push_back({"ReduceMean", reduce<mean>, reduce_attrs, {1}});
  r.push_back({"ReduceMax", reduce<amax>, reduce_attrs, {1}});
  r.push_back({"ReduceMin", reduce<amin>, reduce_attrs, {1}});
  r.push_back({"ReduceL1", reduce<reduce_l1>, reduce_attrs, {1}});
  r.push_back({"ReduceL2", reduce<reduce_l2>, reduce_attrs, {1}});
  r.push_back({"ReduceSumSquare", reduce<reduce_sum_square>, reduce_attrs, {1}});
  r.push_back({"ReduceLogSum", reduce<reduce_log_sum>, reduce_attrs, {1}});
  r.push_back({"ReduceLogSumExp", reduce<reduce_log_sum_exp>, reduce_attrs, {1}});
  r.push_back({"ArgMax", arg_extreme<false>, {"axis", "keepdims", "select_last_index"}});
  r.push_back({"ArgMin", arg_extreme<true>, {"axis", "keepdims", "select_last_index"}});
  r.push_back({"Clip", clip, {}, {1, 2}});
  // saturate (opset 19) concerns the float8 types alone, which zc does not read.
  r.push_back({"Cast", cast_op, {"to", "saturate"}});
  r.push_back({"Identity", identity, {}});
  r.push_back({"Dropout", dropout_op, {"seed"}});
}

}  // namespace zc::onnx_import
