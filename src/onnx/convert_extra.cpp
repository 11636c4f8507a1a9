// Operators that exporters write less often, as compositions of zc's ops: CastLike, the
// trigonometric and hyperbolic functions beyond Sin and Cos, OneHot, EyeLike, Hardmax, the
// normalizations MeanVarianceNormalization, LpNormalization and LRN, GlobalLpPool and
// ReduceProd.
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
#include <algorithm>
#include <cmath>

#include "onnx/convert.h"
#include "onnx/onnx_file.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

// 0, 1, ..., n - 1 as i64 on `device`, laid along `axis` of a tensor of rank `rank`.
Tensor positions(int64_t n, int64_t axis, int64_t rank, Device device) {
  Shape s(static_cast<size_t>(rank), 1);
  s[static_cast<size_t>(axis)] = n;
  Tensor t = arange(n).reshape(s);
  return device.is_cpu() ? t : t.to(device);
}

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

// Indices (of any numeric dtype; a float one truncated) as one-hot vectors along `axis`, off
// value values[0] and on value values[1]. An index in [-depth, 0) counts from the end; one
// outside [-depth, depth) gives a vector of off values.
V one_hot(const NodeArgs& a) {
  const Tensor &idx = a.in(0), &values = a.in(2);
  if (idx.dtype() == DType::boolean) throw a.error("indices must be numbers, got bool");
  const double d = a.scalar(1, "depth");
  if (!(d >= 1)) throw a.error("depth must be at least 1, got " + std::to_string(d));
  const auto depth = static_cast<int64_t>(d);
  if (values.numel() != 2) {
    throw a.error("values must have 2 elements (off, on), got " + shape_str(values.shape()));
  }
  const int64_t rank = idx.dim() + 1;
  const int64_t axis = a.axis(a.i("axis", -1), rank);
  Tensor k = cast(idx, DType::i64);
  k = where(lt(k, 0.0), k + static_cast<double>(depth), k).unsqueeze(axis);
  const Tensor hot = eq(k, positions(depth, axis, rank, k.device()));
  const Tensor flat = values.reshape({2});
  return {where(hot, flat.select(0, 1), flat.select(0, 0))};
}

// A 2-D tensor of the input's shape with ones on diagonal k (above the main one when k > 0),
// in the `dtype` attribute's type or the input's.
V eye_like(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dim() != 2) throw a.error("expected a 2-D input, got " + shape_str(x.shape()));
  const DType to = a.attr("dtype")
                       ? onnx_file::dtype_of(static_cast<int32_t>(a.i("dtype", 1)), "dtype")
                       : x.dtype();
  const int64_t rows = x.size(0), cols = x.size(1);
  const Tensor diff = arange(cols).reshape({1, cols}) - arange(rows).reshape({rows, 1});
  Tensor y = eq(diff, static_cast<double>(a.i("k", 0)));
  if (to != DType::boolean) y = y.to(to);
  return {x.device().is_cpu() ? y : y.to(x.device())};
}

// Opset 13: 1 at the first maximum along `axis`, 0 elsewhere, in the input's dtype.
V hardmax(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dim() == 0) throw a.error("expected at least 1 dim");
  const int64_t axis = a.axis(a.i("axis", -1), x.dim());
  const Tensor first = argmax(x, axis, true);
  return {cast(eq(first, positions(x.size(axis), axis, x.dim(), x.device())), x.dtype())};
}

std::vector<int64_t> axes_of(const NodeArgs& a, const Tensor& x, std::vector<int64_t> axes) {
  for (int64_t& d : axes) d = a.axis(d, x.dim());
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw a.error("axes name a dim twice");
  }
  return axes;
}

// (x - mean) / (std + 1e-9) over `axes`, the population statistics (ONNX's function).
V mean_variance_norm(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const std::vector<int64_t> dims = axes_of(a, x, a.ints("axes", {0, 2, 3}));
  const Tensor centered = x - mean(x, dims, true);
  return {centered / (sqrt(mean(centered * centered, dims, true)) + 1e-9)};
}

// x / ||x||_p along `axis`; a zero norm gives zeros, as ONNX Runtime.
V lp_norm(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const int64_t axis = a.axis(a.i("axis", -1), x.dim()), p = a.i("p", 2);
  if (p != 1 && p != 2) throw a.error("p must be 1 or 2, got " + std::to_string(p));
  const Tensor norm = p == 1 ? sum(abs(x), {axis}, true) : sqrt(sum(x * x, {axis}, true));
  return {where(eq(norm, 0.0), zeros({}, x.dtype(), x.device()), x / norm)};
}

// (sum |x|^p)^(1/p) over the spatial dims of x [N, C, ...], kept as dims of 1.
V global_lp_pool(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dim() < 3) throw a.error("expected an input [N, C, ...], got " + shape_str(x.shape()));
  const int64_t p = a.i("p", 2);
  if (p < 1) throw a.error("p must be at least 1, got " + std::to_string(p));
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  if (p == 1) return {sum(abs(x), dims, true)};
  if (p == 2) return {sqrt(sum(x * x, dims, true))};
  const auto q = static_cast<double>(p);
  return {pow(sum(pow(abs(x), q), dims, true), 1.0 / q)};
}

// x / (bias + alpha / size * sum of x^2 over the `size` channels around each)^beta; the window
// reaches floor((size - 1) / 2) channels back and ceil((size - 1) / 2) forward, zeros past the
// ends.
V lrn(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dim() < 3) throw a.error("expected an input [N, C, ...], got " + shape_str(x.shape()));
  const int64_t size = a.i("size", 0);
  if (size < 1) throw a.error("size must be at least 1, got " + std::to_string(size));
  const double alpha = a.f("alpha", 1e-4f), beta = a.f("beta", 0.75f), bias = a.f("bias", 1.0f);
  const int64_t c = x.size(1), before = (size - 1) / 2, after = size - 1 - before;
  const Tensor sq = x * x;
  Tensor padded = sq;
  if (size > 1) {
    Shape zs = x.shape();
    std::vector<Tensor> parts;
    if (before > 0) {
      zs[1] = before;
      parts.push_back(zeros(zs, x.dtype(), x.device()));
    }
    parts.push_back(sq);
    if (after > 0) {
      zs[1] = after;
      parts.push_back(zeros(zs, x.dtype(), x.device()));
    }
    padded = cat(parts, 1);
  }
  Tensor window = padded.slice(1, 0, c);
  for (int64_t j = 1; j < size; ++j) window = window + padded.slice(1, j, j + c);
  return {x * pow(window * (alpha / static_cast<double>(size)) + bias, -beta)};
}

// The product along `axis` as a tree of elementwise products of halves (an odd length padded
// with a one), kept as a dim of 1: exact for integers, as a loop's product would be.
Tensor prod_along(const Tensor& x, int64_t axis) {
  int64_t n = x.size(axis);
  if (n == 0) {
    Shape s = x.shape();
    s[static_cast<size_t>(axis)] = 1;
    return scalar_on(1, x.dtype(), x.device()).expand(s);
  }
  Tensor y = x;
  while (n > 1) {
    if (n % 2 == 1) {
      Shape s = y.shape();
      s[static_cast<size_t>(axis)] = 1;
      y = cat({y, scalar_on(1, y.dtype(), y.device()).expand(s)}, axis);
      ++n;
    }
    y = y.slice(axis, 0, n / 2) * y.slice(axis, n / 2, n);
    n /= 2;
  }
  return y;
}

// Axes from the attribute before opset 18 and from the second input from it; none means every
// axis, unless noop_with_empty_axes.
V reduce_prod(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dtype() == DType::boolean) throw a.error("bool input (expected numbers)");
  std::vector<int64_t> axes = a.has(1) ? a.values(1, "axes") : a.ints("axes");
  if (axes.empty()) {
    if (a.i("noop_with_empty_axes", 0) != 0) return {x};
    for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
  }
  axes = axes_of(a, x, axes);
  Tensor y = x;
  for (int64_t d : axes) y = prod_along(y, d);
  if (a.i("keepdims", 1) == 0) {
    std::sort(axes.begin(), axes.end());
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) y = y.squeeze(*it);
  }
  return {y};
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
  r.push_back({"OneHot", one_hot, {"axis"}, {1}});
  r.push_back({"EyeLike", eye_like, {"dtype", "k"}});
  r.push_back({"Hardmax", hardmax, {"axis"}});
  r.push_back({"MeanVarianceNormalization", mean_variance_norm, {"axes"}});
  r.push_back({"LpNormalization", lp_norm, {"axis", "p"}});
  r.push_back({"GlobalLpPool", global_lp_pool, {"p"}});
  r.push_back({"LRN", lrn, {"alpha", "beta", "bias", "size"}});
  r.push_back({"ReduceProd", reduce_prod, {"axes", "keepdims", "noop_with_empty_axes"}, {1}});
}

}  // namespace zc::onnx_import
