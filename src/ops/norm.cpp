// softmax, log_softmax and layer_norm: one pass structure per row, as torch's eager kernels
// (a fair baseline is a fused kernel, not a chain of elementwise ops).
#include <cmath>
#include <limits>

#include "cpu/threads.h"
#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"

namespace zc::ops {

namespace {

// x with `dim` moved last, contiguous in compute type T; returns rows and row length.
Tensor rows_last(const Tensor& x, int64_t dim, DType ct, int64_t* rows, int64_t* n) {
  int64_t nd = x.dim();
  Tensor v = x;
  if (nd > 0 && dim != nd - 1) {
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < nd; ++d) {
      if (d != dim) perm.push_back(d);
    }
    perm.push_back(dim);
    Shape shape, strides;
    for (int64_t d : perm) {
      shape.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
    }
    v = Tensor::view_of(x.impl_ptr()->storage, shape, strides, x.storage_offset(), x.dtype());
  }
  *n = nd == 0 ? 1 : x.shape()[dim];
  *rows = *n == 0 ? 0 : x.numel() / *n;
  return v.dtype() == ct ? eager_contiguous(v) : eager_cast(v, ct);
}

// Undoes rows_last's permutation on a contiguous result.
Tensor unpermute(const Tensor& y, const Shape& shape, int64_t dim) {
  int64_t nd = static_cast<int64_t>(shape.size());
  if (nd == 0 || dim == nd - 1) return y;
  // y is [others..., shape[dim]]; view it at the original positions.
  Shape ys = y.strides();
  Shape strides(nd);
  int64_t k = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (d != dim) strides[d] = ys[k++];
  }
  strides[dim] = ys[nd - 1];
  return eager_contiguous(
      Tensor::view_of(y.impl_ptr()->storage, shape, strides, y.storage_offset(), y.dtype()));
}

std::vector<TensorMeta> softmax_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  int64_t dim = std::get<DimAttrs>(attrs).dim;
  int64_t nd = static_cast<int64_t>(in[0].shape.size());
  if (dim < 0 || dim >= std::max<int64_t>(nd, 1)) {
    op_error("softmax",
             "dimension " + std::to_string(dim) + " is out of range for " + meta_str(in[0]));
  }
  TensorMeta out = in[0];
  out.dtype = floating_dtype(out.dtype);
  return {out};
}

template <bool Log>
std::vector<Tensor> softmax_eager(std::span<const Tensor> in, const Attrs& attrs,
                                  std::span<const TensorMeta> outs) {
  int64_t dim = std::get<DimAttrs>(attrs).dim;
  DType ct = compute_dtype(outs[0].dtype);
  int64_t rows, n;
  Tensor x = rows_last(in[0], dim, ct, &rows, &n);
  Tensor y = Tensor::empty(x.shape(), ct);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* xp = elem_ptr<T>(x);
    T* yp = elem_ptr<T>(y);
    cpu::parallel_for_if(rows * n >= kParallelGrain, rows, [&](int64_t r) {
      const T* a = xp + r * n;
      T* o = yp + r * n;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t i = 0; i < n; ++i) m = a[i] > m ? a[i] : m;
      if (std::isinf(m) && m < 0) m = 0;  // an all -inf row gives NaN like torch, not a crash
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        T e = std::exp(a[i] - m);
        if constexpr (!Log) o[i] = e;
        sum += e;
      }
      if constexpr (Log) {
        T lse = static_cast<T>(std::log(sum));
        for (int64_t i = 0; i < n; ++i) o[i] = a[i] - m - lse;
      } else {
        T inv = static_cast<T>(1.0 / sum);
        for (int64_t i = 0; i < n; ++i) o[i] *= inv;
      }
    });
  };
  visit_float_compute(ct, run);
  return {as_dtype(unpermute(y, in[0].shape(), dim), outs[0].dtype)};
}

std::vector<TensorMeta> layer_norm_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<LayerNormAttrs>(attrs);
  const TensorMeta& x = in[0];
  int64_t nd = static_cast<int64_t>(x.shape.size());
  if (a.normalized_ndim < 1 || a.normalized_ndim > nd) {
    op_error("layer_norm", "cannot normalize over the last " + std::to_string(a.normalized_ndim) +
                               " dims of " + meta_str(x));
  }
  Shape norm(x.shape.end() - a.normalized_ndim, x.shape.end());
  size_t expected = 1 + (a.has_weight ? 1 : 0) + (a.has_bias ? 1 : 0);
  if (in.size() != expected) {
    op_error("layer_norm",
             "expected " + std::to_string(expected) + " inputs, got " + std::to_string(in.size()));
  }
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != norm) {
      op_error("layer_norm", std::string(i == 1 && a.has_weight ? "weight " : "bias ") +
                                 meta_str(in[i]) + " does not match the normalized shape " +
                                 shape_str(norm) + " of input " + meta_str(x));
    }
  }
  TensorMeta out = x;
  out.dtype = floating_dtype(result_dtype(in));
  return {out};
}

std::vector<Tensor> layer_norm_eager(std::span<const Tensor> in, const Attrs& attrs,
                                     std::span<const TensorMeta> outs) {
  const auto& a = std::get<LayerNormAttrs>(attrs);
  DType ct = compute_dtype(outs[0].dtype);
  Tensor x = as_dtype(in[0], ct);
  x = eager_contiguous(x);
  int64_t n = shape_numel(Shape(x.shape().end() - a.normalized_ndim, x.shape().end()));
  int64_t rows = n == 0 ? 0 : x.numel() / n;
  Tensor w, b;
  size_t next = 1;
  if (a.has_weight) w = eager_contiguous(as_dtype(in[next++], ct));
  if (a.has_bias) b = eager_contiguous(as_dtype(in[next++], ct));
  Tensor y = Tensor::empty(x.shape(), ct);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* xp = elem_ptr<T>(x);
    const T* wp = w.defined() ? elem_ptr<T>(w) : nullptr;
    const T* bp = b.defined() ? elem_ptr<T>(b) : nullptr;
    T* yp = elem_ptr<T>(y);
    cpu::parallel_for_if(rows * n >= kParallelGrain, rows, [&](int64_t r) {
      const T* p = xp + r * n;
      T* o = yp + r * n;
      double mean = 0;
      for (int64_t i = 0; i < n; ++i) mean += p[i];
      mean /= static_cast<double>(n);
      double var = 0;
      for (int64_t i = 0; i < n; ++i) {
        double d = p[i] - mean;
        var += d * d;
      }
      var /= static_cast<double>(n);  // biased, as layer_norm defines it
      T rstd = static_cast<T>(1.0 / std::sqrt(var + a.eps));
      T m = static_cast<T>(mean);
      for (int64_t i = 0; i < n; ++i) {
        T v = (p[i] - m) * rstd;
        if (wp) v *= wp[i];
        if (bp) v += bp[i];
        o[i] = v;
      }
    });
  };
  visit_float_compute(ct, run);
  return {as_dtype(y, outs[0].dtype)};
}

// With the maximum along `dim` subtracted first, as the eager kernel does, in its compute type.
template <bool Log>
std::vector<Tensor> softmax_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  int64_t dim = std::get<DimAttrs>(attrs).dim;
  DType out = floating_dtype(in[0].dtype());
  Tensor x = to_dtype(in[0], compute_dtype(out));
  if (x.numel() == 0) return {to_dtype(x, out)};  // amax has no identity for an empty dim
  Tensor shifted = x - amax(x, {dim}, true);
  Tensor e = zc::exp(shifted);
  Tensor total = sum(e, {dim}, true);
  return {to_dtype(Log ? shifted - zc::log(total) : e / total, out)};
}

// (x - mean) * rsqrt(biased variance + eps) * weight + bias over the normalized dims.
std::vector<Tensor> layer_norm_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<LayerNormAttrs>(attrs);
  DType out = output_dtype(OpId::layer_norm, in, attrs);
  DType ct = compute_dtype(out);
  Tensor x = to_dtype(in[0], ct);
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - a.normalized_ndim; d < x.dim(); ++d) dims.push_back(d);
  Tensor dev = x - mean(x, dims, true);
  Tensor y = dev * rsqrt(mean(dev * dev, dims, true) + a.eps);
  size_t next = 1;
  if (a.has_weight) y = y * to_dtype(in[next++], ct);
  if (a.has_bias) y = y + to_dtype(in[next++], ct);
  return {to_dtype(y, out)};
}

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - softmax(x) sum(g), along the dim, in
// the compute type.
template <bool Log>
std::vector<Tensor> softmax_vjp(const VjpArgs& args) {
  int64_t dim = std::get<DimAttrs>(args.attrs).dim;
  DType ct = compute_dtype(args.outputs[0].dtype());
  Tensor y = to_dtype(args.outputs[0], ct), g = to_dtype(out_grad(args), ct);
  if (y.numel() == 0) return {g};
  if (Log) return {g - zc::exp(y) * sum(g, {dim}, true)};
  return {y * (g - sum(g * y, {dim}, true))};
}

// With x^ = (x - mean) * rstd over the normalized dims and gy = g * weight:
// dx = rstd (gy - mean(gy) - x^ mean(gy x^)), dweight = sum of g x^ over the leading dims,
// dbias = sum of g over them. Mean and rstd are recomputed from x rather than saved.
std::vector<Tensor> layer_norm_vjp(const VjpArgs& args) {
  const auto& a = std::get<LayerNormAttrs>(args.attrs);
  DType ct = compute_dtype(args.outputs[0].dtype());
  Tensor x = to_dtype(args.inputs[0], ct), g = to_dtype(out_grad(args), ct);
  std::vector<int64_t> dims, lead;
  for (int64_t d = 0; d < x.dim(); ++d)
    (d < x.dim() - a.normalized_ndim ? lead : dims).push_back(d);
  Tensor dev = x - mean(x, dims, true);
  Tensor rstd = rsqrt(mean(dev * dev, dims, true) + a.eps);
  Tensor xhat = dev * rstd;
  std::vector<Tensor> out(args.inputs.size());
  size_t next = 1;
  Tensor gy = g;
  if (a.has_weight) gy = g * to_dtype(args.inputs[next], ct);
  if (args.wants(0)) {
    out[0] = rstd * (gy - mean(gy, dims, true) - xhat * mean(gy * xhat, dims, true));
  }
  auto over_lead = [&](const Tensor& t) { return lead.empty() ? t : sum(t, lead); };
  if (a.has_weight) {
    if (args.wants(next)) out[next] = over_lead(g * xhat);
    ++next;
  }
  if (a.has_bias && args.wants(next)) out[next] = over_lead(g);
  return out;
}

}  // namespace

void define_norm_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::softmax,
                 .attrs_index = attrs_index_of<DimAttrs>(),
                 .infer = softmax_infer,
                 .eager = softmax_eager<false>,
                 .decompose = softmax_decompose<false>,
                 .derivative = softmax_vjp<false>});
  t.define(OpDef{.id = OpId::log_softmax,
                 .attrs_index = attrs_index_of<DimAttrs>(),
                 .infer = softmax_infer,
                 .eager = softmax_eager<true>,
                 .decompose = softmax_decompose<true>,
                 .derivative = softmax_vjp<true>});
  t.define(OpDef{.id = OpId::layer_norm,
                 .min_inputs = 1,
                 .max_inputs = 3,
                 .attrs_index = attrs_index_of<LayerNormAttrs>(),
                 .infer = layer_norm_infer,
                 .eager = layer_norm_eager,
                 .decompose = layer_norm_decompose,
                 .derivative = layer_norm_vjp});
}

}  // namespace zc::ops
