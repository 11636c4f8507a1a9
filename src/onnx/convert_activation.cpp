// Activations and elementwise predicates that zc computes as compositions of its primitive ops
// (each fuses into one loop when compiled): the hard and leaky activations MobileNet and
// GAN-style networks use, the smooth ones (Softplus, Mish, ELU family), IsNaN and IsInf (the
// attention masks transformers exports build), Sign, Xor and the variadic Mean.
#include <cmath>
#include <limits>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

V is_nan(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (!is_floating(x.dtype())) return {zeros(x.shape(), DType::boolean, x.device())};
  return {ne(x, x)};  // NaN alone differs from itself
}

V is_inf(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const bool neg = a.i("detect_negative", 1) != 0, pos = a.i("detect_positive", 1) != 0;
  if (!is_floating(x.dtype()) || (!neg && !pos)) {
    return {zeros(x.shape(), DType::boolean, x.device())};
  }
  const double inf = std::numeric_limits<double>::infinity();
  if (neg && pos) return {eq(abs(x), inf)};
  return {eq(x, pos ? inf : -inf)};
}

// max(0, min(1, alpha x + beta)).
V hard_sigmoid(const NodeArgs& a) {
  return {clamp(a.in(0) * a.f("alpha", 0.2f) + a.f("beta", 0.5f), 0.0, 1.0)};
}

// x hard_sigmoid(x) with alpha 1/6 and beta 1/2.
V hard_swish(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {x * clamp(x / 6.0 + 0.5, 0.0, 1.0)};
}

V leaky_relu(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {where(ge(x, 0.0), x, x * a.f("alpha", 0.01f))};
}

// A negative slope per element of `slope`, broadcast to x (unidirectionally).
V prelu(const NodeArgs& a) {
  const Tensor &x = a.in(0), &slope = a.in(1);
  return {where(ge(x, 0.0), x, x * slope)};
}

V elu(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {where(gt(x, 0.0), x, (exp(x) - 1.0) * a.f("alpha", 1.0f))};
}

V selu(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const double alpha = a.f("alpha", 1.67326319217681884765625f);
  const double gamma = a.f("gamma", 1.05070102214813232421875f);
  return {where(gt(x, 0.0), x, (exp(x) - 1.0) * alpha) * gamma};
}

// max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
V celu(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const double alpha = a.f("alpha", 1.0f);
  return {relu(x) + minimum((exp(x / alpha) - 1.0) * alpha, 0.0)};
}

V thresholded_relu(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {where(gt(x, a.f("alpha", 1.0f)), x, zeros({}, x.dtype()))};
}

// log(1 + exp(x)), written so that neither side overflows: max(x, 0) + log(1 + exp(-|x|)).
Tensor softplus_of(const Tensor& x) {
  return relu(x) + log(exp(-abs(x)) + 1.0);
}

V softplus(const NodeArgs& a) {
  return {softplus_of(a.in(0))};
}

V softsign(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {x / (abs(x) + 1.0)};
}

V mish(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {x * tanh(softplus_of(x))};
}

// x + bias below -lambd, x - bias above lambd, 0 between.
V shrink(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const double bias = a.f("bias", 0.0f), lambd = a.f("lambd", 0.5f);
  const Tensor zero = zeros({}, x.dtype());
  return {where(lt(x, -lambd), x + bias, where(gt(x, lambd), x - bias, zero))};
}

// -1, 0 or 1 in x's dtype.
V sign_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  return {cast(gt(x, 0.0), x.dtype()) - cast(lt(x, 0.0), x.dtype())};
}

V xor_op(const NodeArgs& a) {
  return {ne(a.in(0), a.in(1))};
}

// The elementwise mean of any number of inputs.
V mean_op(const NodeArgs& a) {
  Tensor y = a.in(0);
  for (size_t i = 1; i < a.count(); ++i) y = y + a.in(i);
  return {a.count() == 1 ? y : y / static_cast<double>(a.count())};
}

}  // namespace

void add_activation_rules(std::vector<OpRule>& r) {
  r.push_back({"IsNaN", is_nan, {}});
  r.push_back({"IsInf", is_inf, {"detect_negative", "detect_positive"}});
  r.push_back({"HardSigmoid", hard_sigmoid, {"alpha", "beta"}});
  r.push_back({"HardSwish", hard_swish, {}});
  r.push_back({"LeakyRelu", leaky_relu, {"alpha"}});
  r.push_back({"PRelu", prelu, {}});
  r.push_back({"Elu", elu, {"alpha"}});
  r.push_back({"Selu", selu, {"alpha", "gamma"}});
  r.push_back({"Celu", celu, {"alpha"}});
  r.push_back({"ThresholdedRelu", thresholded_relu, {"alpha"}});
  r.push_back({"Softplus", softplus, {}});
  r.push_back({"Softsign", softsign, {}});
  r.push_back({"Mish", mish, {}});
  r.push_back({"Shrink", shrink, {"bias", "lambd"}});
  r.push_back({"Sign", sign_op, {}});
  r.push_back({"Xor", xor_op, {}});
  r.push_back({"Mean", mean_op, {}});
}

}  // namespace zc::onnx_import
