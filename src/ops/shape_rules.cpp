#include "ops/shape_rules.h"

#include <algorithm>
#include <optional>

namespace zc::ops {

std::string meta_str(const TensorMeta& m) {
  return shape_str(m.shape) + " " + std::string(dtype_name(m.dtype));
}

std::string metas_str(std::span<const TensorMeta> ms) {
  std::string out;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (i) out += i + 1 == ms.size() ? " and " : ", ";
    out += meta_str(ms[i]);
  }
  return out;
}

void op_error(std::string_view op, const std::string& detail) {
  throw Error(std::string(op) + ": " + detail);
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      op_error(op, "shapes " + shape_str(a) + " and " + shape_str(b) +
                       " cannot broadcast: dimension " + std::to_string(i) + " has sizes " +
                       std::to_string(da) + " and " + std::to_string(db) +
                       " (expected equal sizes or 1)");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim) {
  int64_t d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= std::max<int64_t>(ndim, 1)) {
    op_error(op, "dimension " + std::to_string(dim) + " is out of range for a tensor of " +
                     std::to_string(ndim) + " dims (expected " + std::to_string(-ndim) + " to " +
                     std::to_string(ndim - 1) + ")");
  }
  return d;
}

std::vector<int64_t> reduce_dims(std::string_view op, const std::vector<int64_t>& dims,
                                 int64_t ndim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(ndim == 0 ? (wrap_dim(op, d, 1), 0) : wrap_dim(op, d, ndim));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    op_error(op, "dimension list " + shape_str(dims) + " repeats a dimension");
  }
  if (ndim == 0) out.clear();
  return out;
}

namespace {
// Combines the result of a higher tier with that of a lower one (nullopt: tier absent).
std::optional<DType> combine_tiers(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::boolean || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

DType result_dtype(std::span<const TensorMeta> ms) {
  std::optional<DType> dimensioned, zero_dim, wrapped;
  auto fold = [](std::optional<DType>& acc, DType t) { acc = acc ? promote_types(*acc, t) : t; };
  for (const TensorMeta& m : ms) {
    if (m.wrapped_number) {
      fold(wrapped, is_floating(m.dtype)        ? DType::f32
                    : m.dtype == DType::boolean ? DType::boolean
                                                : DType::i64);
    } else if (m.shape.empty()) {
      fold(zero_dim, m.dtype);
    } else {
      fold(dimensioned, m.dtype);
    }
  }
  std::optional<DType> r = combine_tiers(dimensioned, combine_tiers(zero_dim, wrapped));
  return r.value_or(DType::f32);
}

bool reshape_strides(const Shape& shape, const Shape& strides, const Shape& target,
                     Shape* out_strides) {
  // Walk groups of old dims that map onto groups of new dims with equal element counts;
  // each old group must be contiguous in itself for the view to exist.
  Shape out(target.size());
  int64_t numel = shape_numel(shape);
  if (numel == 0) {
    *out_strides = contiguous_strides(target);
    return true;
  }
  size_t oi = 0, ni = 0;
  const size_t on = shape.size(), nn = target.size();
  while (ni < nn || oi < on) {
    // Skip size-1 dims on both sides: they constrain nothing.
    if (ni < nn && target[ni] == 1) {
      out[ni] = 1;
      ++ni;
      continue;
    }
    if (oi < on && shape[oi] == 1) {
      ++oi;
      continue;
    }
    if (oi >= on || ni >= nn) return false;
    size_t ostart = oi, nstart = ni;
    int64_t ocount = shape[oi++], ncount = target[ni++];
    while (ocount != ncount) {
      if (ocount < ncount) {
        if (oi >= on) return false;
        if (shape[oi] != 1) ocount *= shape[oi];
        ++oi;
      } else {
        if (ni >= nn) return false;
        ncount *= target[ni++];
      }
    }
    // Old dims [ostart, oi) must be contiguous among themselves (ignoring size-1 dims).
    int64_t inner_stride = 0;
    bool first = true;
    int64_t expected = 0;
    for (size_t d = oi; d-- > ostart;) {
      if (shape[d] == 1) continue;
      if (first) {
        inner_stride = strides[d];
        expected = strides[d] * shape[d];
        first = false;
      } else {
        if (strides[d] != expected) return false;
        expected *= shape[d];
      }
    }
    // New dims [nstart, ni) get contiguous strides starting at the innermost old stride.
    int64_t st = inner_stride;
    for (size_t d = ni; d-- > nstart;) {
      out[d] = st;
      st *= target[d];
    }
  }
  *out_strides = out;
  return true;
}

MatmulShapes matmul_shapes(const Shape& a_shape, const Shape& b_shape) {
  if (a_shape.empty() || b_shape.empty()) {
    op_error("matmul", shape_str(a_shape) + " @ " + shape_str(b_shape) +
                           ": both operands need at least 1 dimension");
  }
  MatmulShapes s;
  s.a_vec = a_shape.size() == 1;
  s.b_vec = b_shape.size() == 1;
  Shape as = s.a_vec ? Shape{1, a_shape[0]} : a_shape;
  Shape bs = s.b_vec ? Shape{b_shape[0], 1} : b_shape;
  s.M = as[as.size() - 2];
  s.K = as.back();
  s.N = bs.back();
  int64_t kb = bs[bs.size() - 2];
  if (s.K != kb) {
    op_error("matmul", shape_str(a_shape) + " @ " + shape_str(b_shape) + ": inner dimensions " +
                           std::to_string(s.K) + " and " + std::to_string(kb) + " differ");
  }
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  s.batch = broadcast_shapes("matmul", ab, bb);
  s.out = s.batch;
  if (!s.a_vec) s.out.push_back(s.M);
  if (!s.b_vec) s.out.push_back(s.N);
  return s;
}

}  // namespace zc::ops
