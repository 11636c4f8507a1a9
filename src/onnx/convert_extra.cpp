// Operators that exporters write less often, as compositions of zc's ops: CastLike and the
// trigonometric and hyperbolic functions beyond Sin and Cos.
//
// The hyperbolic functions are built from exp, log and sqrt in forms that keep their relative
// precision where the textbook ones cancel (near 0, and acosh near 1):
//   sinh  odd; |x| < 1/2: its Taylor polynomial to x^13 (truncation < 1e-17 relative), else
//         (e^|x| - e^-|x|) / 2, which cancels by at most a factor of 1.6 there;
//   cosh  (e^x + e^-x) / 2, which never cancels (it overflows where e^|x| does);
//   asinh odd; log1p(a + a^2 / (1 + sqrt(1 + a^2))) for a = |x|, log(a) + log 2 past 2^28
//         (where a^2 would overflow in f32 and sqrt(1 + a^2) is a);
//   acosh log1p((x - 1) + sqrt((x - 1)(x + 1))) (x - 1 exact near 1, no x^2 - 1 rounding),
//         log(x) + log 2 past 2^28; NaN below 1 as ONNX Runtime;
//   atanh odd; log1p(2a / (1 - a)) / 2 for a = |x|;
// where log1p(y) = 2 atanh(y / (2 + y)) by its odd series in s = y / (2 + y) to s^13 for
// |y| < 1/2 (truncation under 2e-8 relative, under 1e-10 for the y >= 0 it is given here), else
// log(1 + y), whose rounding of 1 + y is then small against the result. Each is within a few
// float roundings of the true value, relative to it; half-precision inputs compute in f32.
// Tan is sin / cos.
#include <cmath>

#include "onnx/convert.h"
#include "onnx/onnx_file.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

V cast_like(const NodeArgs& a) {
  const Tensor &x = a.in(0), &like = a.in(1);
  if (x.dtype() == like.dtype()) return {x};
  return {x.is_traced() ? cast(x, like.dtype()) : x.to(like.dtype())};
}

// An elementwise function of a float input: half precision computes in f32 and is cast back;
// integers and bools, which ONNX does not allow, are an error.
template <Tensor (*F)(const Tensor&)>
V float_unary(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (!is_floating(x.dtype())) {
    throw a.error("expected a float input, got " + std::string(dtype_name(x.dtype())));
  }
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16) {
    return {cast(F(cast(x, DType::f32)), x.dtype())};
  }
  return {F(x)};
}

// p(t) = c[0] + t (c[1] + t (c[2] + ...)).
Tensor horner(const Tensor& t, const std::vector<double>& c) {
  Tensor y = t * c.back() + c[c.size() - 2];
  for (size_t k = c.size() - 2; k-- > 0;) y = y * t + c[k];
  return y;
}

// -x where x < 0, else x (keeps the odd functions exactly odd).
Tensor with_sign_of(const Tensor& x, const Tensor& magnitude) {
  return where(lt(x, 0.0), -magnitude, magnitude);
}

Tensor log1p_of(const Tensor& y) {
  const Tensor s = y / (y + 2.0), s2 = s * s;
  const Tensor series =
      s * horner(s2, {2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13});
  return where(lt(abs(y), 0.5), series, log(y + 1.0));
}

Tensor tan_of(const Tensor& x) {
  return sin(x) / cos(x);
}

Tensor sinh_of(const Tensor& x) {
  const Tensor m = abs(x), m2 = m * m;
  std::vector<double> c;  // 1 / (2k + 1)!
  double f = 1;
  for (int k = 0; k <= 6; ++k) {
    c.push_back(1.0 / f);
    f *= (2 * k + 2) * (2 * k + 3);
  }
  const Tensor series = m * horner(m2, c);
  const Tensor e = exp(m);
  return with_sign_of(x, where(lt(m, 0.5), series, (e - 1.0 / e) * 0.5));
}

Tensor cosh_of(const Tensor& x) {
  const Tensor e = exp(x);
  return (e + 1.0 / e) * 0.5;
}

constexpr double kLarge = 268435456.0;  // 2^28

Tensor asinh_of(const Tensor& x) {
  const Tensor m = abs(x), m2 = m * m;
  const Tensor small = log1p_of(m + m2 / (sqrt(m2 + 1.0) + 1.0));
  return with_sign_of(x, where(gt(m, kLarge), log(m) + std::log(2.0), small));
}

Tensor acosh_of(const Tensor& x) {
  const Tensor d = x - 1.0;
  const Tensor near = log1p_of(d + sqrt(d * (x + 1.0)));
  return where(gt(x, kLarge), log(x) + std::log(2.0), near);
}

Tensor atanh_of(const Tensor& x) {
  const Tensor m = abs(x);
  return with_sign_of(x, log1p_of(m * 2.0 / (1.0 - m)) * 0.5);
}

}  // namespace

void add_extra_rules(std::vector<OpRule>& r) {
  // saturate (opset 19) concerns the float8 types alone, which zc does not read (as Cast).
  r.push_back({"CastLike", cast_like, {"saturate"}});
  r.push_back({"Tan", float_unary<tan_of>, {}});
  r.push_back({"Sinh", float_unary<sinh_of>, {}});
  r.push_back({"Cosh", float_unary<cosh_of>, {}});
  r.push_back({"Asinh", float_unary<asinh_of>, {}});
  r.push_back({"Acosh", float_unary<acosh_of>, {}});
  r.push_back({"Atanh", float_unary<atanh_of>, {}});
}

}  // namespace zc::onnx_import
