// Reductions over any set of dims. The input is viewed with the kept dims first and the
// reduced dims last, so every output element reduces one contiguous run; floating sums
// accumulate in double, which keeps f32 results within an ulp or two of the exact value.
#include <cmath>
#include <limits>
#include <numeric>

#include "cpu/threads.h"
#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"

namespace zc::ops {

namespace {

enum class Kind { sum, mean, amax, amin, argmax, var };

constexpr const char* kind_name(Kind k) {
  switch (k) {
    case Kind::sum:
      return "sum";
    case Kind::mean:
      return "mean";
    case Kind::amax:
      return "amax";
    case Kind::amin:
      return "amin";
    case Kind::argmax:
      return "argmax";
    case Kind::var:
      return "var";
  }
  return "";
}

template <Kind K>
std::vector<TensorMeta> reduce_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<ReduceAttrs>(attrs);
  const TensorMeta& x = in[0];
  int64_t nd = static_cast<int64_t>(x.shape.size());
  for (int64_t d : a.dims) {
    if (d < 0 || d >= std::max<int64_t>(nd, 1)) {
      op_error(kind_name(K),
               "dimension " + std::to_string(d) + " is out of range for " + meta_str(x));
    }
  }
  TensorMeta out;
  out.device = x.device;
  std::vector<bool> reduced(nd, false);
  for (int64_t d : a.dims) {
    if (d < nd) reduced[d] = true;
  }
  int64_t count = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      count *= x.shape[d];
      if (a.keepdim) out.shape.push_back(1);
    } else {
      out.shape.push_back(x.shape[d]);
    }
  }
  if ((K == Kind::amax || K == Kind::amin || K == Kind::argmax) && count == 0) {
    op_error(kind_name(K), "cannot reduce over an empty dimension of " + meta_str(x) +
                               " (the result has no identity)");
  }
  switch (K) {
    case Kind::sum:
      out.dtype = is_floating(x.dtype) ? x.dtype : DType::i64;
      break;
    case Kind::mean:
    case Kind::var:
      out.dtype = floating_dtype(x.dtype);
      break;
    case Kind::amax:
    case Kind::amin:
      out.dtype = x.dtype;
      break;
    case Kind::argmax:
      out.dtype = DType::i64;
      break;
  }
  return {out};
}

// Accumulator type: double for floating inputs, int64 for integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <Kind K, class T, class O>
void reduce_rows(const T* x, O* out, int64_t rows, int64_t n, int64_t correction) {
  bool parallel = rows * n >= kParallelGrain && rows > 1;
  cpu::parallel_for_if(parallel, rows, [&](int64_t r) {
    const T* p = x + r * n;
    if constexpr (K == Kind::sum || K == Kind::mean) {
      Acc<T> acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += static_cast<Acc<T>>(p[i]);
      if constexpr (K == Kind::mean) {
        out[r] = static_cast<O>(static_cast<double>(acc) / static_cast<double>(n));
      } else {
        out[r] = static_cast<O>(acc);
      }
    } else if constexpr (K == Kind::var) {
      double mean = 0;
      for (int64_t i = 0; i < n; ++i) mean += static_cast<double>(p[i]);
      mean /= static_cast<double>(n);
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) {
        double d = static_cast<double>(p[i]) - mean;
        ss += d * d;
      }
      double denom = static_cast<double>(n - correction);
      out[r] = static_cast<O>(denom > 0 ? ss / denom : std::numeric_limits<double>::quiet_NaN());
    } else if constexpr (K == Kind::amax || K == Kind::amin) {
      T best = p[0];
      for (int64_t i = 1; i < n; ++i) {
        T v = p[i];
        if (best != best) break;  // NaN wins and stays
        if (v != v || (K == Kind::amax ? v > best : v < best)) best = v;
      }
      out[r] = static_cast<O>(best);
    } else {  // argmax: the first maximum; NaN counts as the maximum, as in torch
      int64_t at = 0;
      T best = p[0];
      for (int64_t i = 1; i < n && best == best; ++i) {
        if (p[i] != p[i] || p[i] > best) {
          best = p[i];
          at = i;
        }
      }
      out[r] = static_cast<O>(at);
    }
  });
}

template <Kind K>
std::vector<Tensor> reduce_eager(std::span<const Tensor> in, const Attrs& attrs,
                                 std::span<const TensorMeta> outs) {
  const auto& a = std::get<ReduceAttrs>(attrs);
  const Tensor& x0 = in[0];
  int64_t nd = x0.dim();
  std::vector<bool> reduced(nd, false);
  for (int64_t d : a.dims) {
    if (d < nd) reduced[d] = true;
  }
  std::vector<int64_t> perm;
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      perm.push_back(d);
      rows *= x0.shape()[d];
    }
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      perm.push_back(d);
      n *= x0.shape()[d];
    }
  }
  DType ct = compute_dtype(x0.dtype());
  if (ct == DType::boolean) ct = DType::i64;
  // View with reduced dims last, then make it contiguous in the compute type.
  Tensor xv = Tensor::view_of(x0.impl_ptr()->storage, {}, {}, x0.storage_offset(), x0.dtype());
  for (int64_t d : perm) {
    xv.unsafe_impl()->shape.push_back(x0.shape()[d]);
    xv.unsafe_impl()->strides.push_back(x0.strides()[d]);
  }
  Tensor x = xv.dtype() == ct ? eager_contiguous(xv) : eager_cast(xv, ct);
  DType out_ct = compute_dtype(outs[0].dtype);
  Tensor out = Tensor::empty(outs[0].shape, out_ct);
  if (rows == 0) return {as_dtype(out, outs[0].dtype)};
  visit_dtype(ct, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, Half> && !std::is_same_v<T, BFloat16> &&
                  !std::is_same_v<T, bool>) {
      visit_dtype(out_ct, [&](auto otag) {
        using O = decltype(otag);
        if constexpr (!std::is_same_v<O, Half> && !std::is_same_v<O, BFloat16>) {
          if (n == 0) {  // sum of nothing is 0; mean and var of nothing are NaN
            double v = K == Kind::sum ? 0.0 : std::numeric_limits<double>::quiet_NaN();
            O* o = elem_ptr<O>(out);
            for (int64_t r = 0; r < rows; ++r) o[r] = convert_element<O>(v);
          } else {
            reduce_rows<K>(elem_ptr<T>(x), elem_ptr<O>(out), rows, n, a.correction);
          }
        }
      });
    }
  });
  return {as_dtype(out, outs[0].dtype)};
}

// Elements each output element of a reduction over `dims` of x combines.
int64_t reduced_numel(const Tensor& x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < x.dim()) n *= x.shape()[d];
  }
  return n;
}

// sum / n. Floating inputs sum in their compute type; integers sum exactly as i64 and the
// division makes the f32 result, as the eager kernel's integer accumulator does.
std::vector<Tensor> mean_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<ReduceAttrs>(attrs);
  DType out = floating_dtype(in[0].dtype());
  Tensor x = is_floating(in[0].dtype()) ? to_dtype(in[0], compute_dtype(out)) : in[0];
  Tensor s = zc::sum(x, a.dims, a.keepdim) / static_cast<double>(reduced_numel(x, a.dims));
  return {to_dtype(s, out)};
}

// Two passes like the eager kernel: the mean, then the squared deviations from it, divided by
// n - correction (NaN when that is not positive).
std::vector<Tensor> var_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<ReduceAttrs>(attrs);
  DType out = floating_dtype(in[0].dtype());
  Tensor x = to_dtype(in[0], compute_dtype(out));
  Tensor dev = x - zc::mean(x, a.dims, true);
  Tensor ss = zc::sum(dev * dev, a.dims, a.keepdim);
  int64_t denom = reduced_numel(x, a.dims) - a.correction;
  Tensor v =
      denom > 0 ? ss / static_cast<double>(denom) : ss * std::numeric_limits<double>::quiet_NaN();
  return {to_dtype(v, out)};
}

// Each input element gets the gradient of the output it went into: for sum as it is, for mean
// divided by the count, for amax/amin shared evenly among the elements equal to the extreme
// (as torch), for var through d/dx (x - mean)^2 / (n - correction).
template <Kind K>
std::vector<Tensor> reduce_vjp(const VjpArgs& args) {
  const auto& a = std::get<ReduceAttrs>(args.attrs);
  const Tensor& x = args.inputs[0];
  Tensor g = unreduce(out_grad(args), x.shape(), a.dims, a.keepdim);
  double n = static_cast<double>(reduced_numel(x, a.dims));
  if constexpr (K == Kind::sum) {
    return {g};
  } else if constexpr (K == Kind::mean) {
    return {g / n};
  } else if constexpr (K == Kind::amax || K == Kind::amin) {
    Tensor y = unreduce(args.outputs[0], x.shape(), a.dims, a.keepdim);
    Tensor hit = cast(eq(x, y), g.dtype());
    return {g * hit / zc::sum(hit, a.dims, true)};
  } else if constexpr (K == Kind::var) {
    Tensor dev = x - zc::mean(x, a.dims, true);
    return {g * dev * (2.0 / (n - static_cast<double>(a.correction)))};
  } else {
    return {Tensor()};
  }
}

template <Kind K>
OpDef reduce_def(OpId id, DecomposeFn decompose = nullptr) {
  return OpDef{.id = id,
               .attrs_index = attrs_index_of<ReduceAttrs>(),
               .infer = reduce_infer<K>,
               .eager = reduce_eager<K>,
               .decompose = decompose,
               // argmax's output is an index: nothing to differentiate.
               .derivative = K == Kind::argmax ? nullptr : reduce_vjp<K>};
}

}  // namespace

void define_reduction_ops(OpTable& t) {
  t.define(reduce_def<Kind::sum>(OpId::sum));
  t.define(reduce_def<Kind::mean>(OpId::mean, mean_decompose));
  t.define(reduce_def<Kind::amax>(OpId::amax));
  t.define(reduce_def<Kind::amin>(OpId::amin));
  t.define(reduce_def<Kind::argmax>(OpId::argmax));
  t.define(reduce_def<Kind::var>(OpId::var, var_decompose));
}

}  // namespace zc::ops
