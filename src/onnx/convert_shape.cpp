// Shape and layout operators, and the ones exporters use to compute shapes (Shape, Gather on a
// shape, Concat, ConstantOfShape, Range): those run on concrete values, even during a trace,
// because a traced tensor's shape is known.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

// x's elements at positions `k` (i64, in range, on x's device) along `axis`: the rows of x with
// `axis` first, looked up as an embedding, then the dims put back in place.
Tensor take_along(const Tensor& x, int64_t axis, const Tensor& k) {
  const int64_t n = x.size(axis);
  std::vector<int64_t> perm{axis};
  Shape rest;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d != axis) {
      perm.push_back(d);
      rest.push_back(x.size(d));
    }
  }
  const int64_t width = std::accumulate(rest.begin(), rest.end(), int64_t{1}, std::multiplies<>());
  Tensor rows = embedding(x.permute(perm).reshape({n, width}), k);
  Shape shaped = k.shape();
  shaped.insert(shaped.end(), rest.begin(), rest.end());
  Tensor y = rows.reshape(shaped);
  const int64_t kd = k.dim();
  std::vector<int64_t> back;
  for (int64_t d = 0; d < axis; ++d) back.push_back(kd + d);
  for (int64_t d = 0; d < kd; ++d) back.push_back(d);
  for (int64_t d = kd + axis; d < y.dim(); ++d) back.push_back(d);
  return y.permute(back);
}

V shape_op(const NodeArgs& a) {
  const Shape& s = a.in(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  const int64_t start = clampi(a.i("start", 0)), end = clampi(a.i("end", rank));
  return {i64_values(std::vector<int64_t>(s.begin() + start, s.begin() + std::max(start, end)))};
}

// allowzero 0: a 0 copies the input's dim; -1 is inferred.
V reshape_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  std::vector<int64_t> shape = a.values(1, "the shape");
  const bool allowzero = a.i("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (static_cast<int64_t>(i) >= x.dim()) throw a.error("a 0 past the input's rank");
      shape[i] = x.size(static_cast<int64_t>(i));
    }
  }
  return {x.reshape(shape)};
}

V transpose_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  std::vector<int64_t> perm = a.ints("perm");
  if (perm.empty()) {
    for (int64_t d = x.dim() - 1; d >= 0; --d) perm.push_back(d);
  }
  return {x.permute(perm)};
}

V slice_op(const NodeArgs& a) {
  Tensor x = a.in(0);
  const std::vector<int64_t> starts = a.values(1, "starts"), ends = a.values(2, "ends");
  std::vector<int64_t> axes, steps;
  if (a.has(3)) {
    axes = a.values(3, "axes");
  } else {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  steps = a.has(4) ? a.values(4, "steps") : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    throw a.error("starts, ends, axes and steps must have the same length");
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t axis = a.axis(axes[i], x.dim()), n = x.size(axis);
    if (steps[i] == 0) throw a.error("a step of 0");
    if (steps[i] < 0) {
      // Backwards from start (clamped to [0, n - 1]) while above end (clamped to [-1, n - 1]).
      auto clampb = [&](int64_t v, int64_t lo) {
        return std::clamp<int64_t>(v < 0 ? v + n : v, lo, n - 1);
      };
      std::vector<int64_t> at;
      for (int64_t k = clampb(starts[i], 0), e = clampb(ends[i], -1); k > e; k += steps[i]) {
        at.push_back(k);
      }
      if (at.empty() || n == 0) {
        x = x.slice(axis, 0, 0);
        continue;
      }
      Tensor k = i64_values(at);
      x = take_along(x, axis, x.device().is_cpu() ? k : k.to(x.device()));
      continue;
    }
    auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
    const int64_t s = clampi(starts[i]), e = std::max(s, clampi(ends[i]));
    x = x.slice(axis, s, e, steps[i]);
  }
  return {x};
}

V concat_op(const NodeArgs& a) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < a.count(); ++i) {
    if (a.has(i) && a.in(i).numel() > 0) parts.push_back(a.in(i));
  }
  if (parts.empty()) return {a.in(0)};
  return {cat(parts, a.axis(a.i("axis", 0), parts[0].dim()))};
}

V split_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const int64_t axis = a.axis(a.i("axis", 0), x.dim()), n = x.size(axis);
  std::vector<int64_t> sizes = a.has(1) ? a.values(1, "split") : std::vector<int64_t>{};
  const int64_t parts = static_cast<int64_t>(a.outputs());
  if (sizes.empty() && a.attr("num_outputs")) {
    // Opset 18: num_outputs parts of ceil(n / num_outputs), the last one what is left.
    const int64_t k = a.i("num_outputs", 0);
    if (k < 1 || k != parts) {
      throw a.error("num_outputs " + std::to_string(k) + " for " + std::to_string(parts) +
                    " outputs");
    }
    const int64_t chunk = (n + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) sizes.push_back(std::clamp<int64_t>(n - i * chunk, 0, chunk));
  }
  if (sizes.empty()) {
    if (parts < 1 || n % parts != 0) {
      throw a.error("dim " + std::to_string(n) + " does not split into " + std::to_string(parts) +
                    " equal parts");
    }
    sizes.assign(static_cast<size_t>(parts), n / parts);
  }
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != n) {
    throw a.error("split sizes do not add up to " + std::to_string(n));
  }
  V out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(x.slice(axis, at, at + s));
    at += s;
  }
  return out;
}

// Output dims: x's before `axis`, the indices', x's after it.
V gather_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const Tensor& idx = a.in(1);
  const int64_t axis = a.axis(a.i("axis", 0), x.dim()), n = x.size(axis);
  if (!is_integral(idx.dtype())) throw a.error("indices must be integers");
  Tensor k;  // the indices, negative ones counted from the end
  if (!idx.is_traced()) {
    std::vector<int64_t> ks = a.values(1, "indices");
    for (int64_t& k : ks) {
      if (k < -n || k >= n) {
        throw a.error("index " + std::to_string(k) + " is out of range for dim " +
                      std::to_string(n));
      }
      if (k < 0) k += n;
    }
    if (idx.dim() == 0) return {x.slice(axis, ks[0], ks[0] + 1).squeeze(axis)};
    if (!x.is_traced()) {
      // A gather of known values (a shape): copy the rows.
      std::vector<Tensor> rows;
      for (int64_t k : ks) rows.push_back(x.slice(axis, k, k + 1));
      Shape out = x.shape();
      out.erase(out.begin() + axis);
      out.insert(out.begin() + axis, idx.shape().begin(), idx.shape().end());
      return {(rows.empty() ? x.slice(axis, 0, 0) : cat(rows, axis)).contiguous().reshape(out)};
    }
    k = i64_values(ks).reshape(idx.shape());
    if (!x.device().is_cpu()) k = k.to(x.device());
  } else {
    k = where(lt(idx, 0.0), idx + static_cast<double>(n), idx);
  }
  return {take_along(x, axis, k)};
}

V unsqueeze_op(const NodeArgs& a) {
  Tensor x = a.in(0);
  std::vector<int64_t> axes = a.values(1, "axes");
  const int64_t rank = x.dim() + static_cast<int64_t>(axes.size());
  for (int64_t& d : axes) d = a.axis(d, rank);
  std::sort(axes.begin(), axes.end());
  for (int64_t d : axes) x = x.unsqueeze(d);
  return {x};
}

V squeeze_op(const NodeArgs& a) {
  Tensor x = a.in(0);
  if (!a.has(1)) return {x.squeeze()};
  std::vector<int64_t> axes = a.values(1, "axes");
  for (int64_t& d : axes) d = a.axis(d, x.dim());
  std::sort(axes.rbegin(), axes.rend());
  for (int64_t d : axes) {
    if (x.size(d) != 1) throw a.error("dim " + std::to_string(d) + " is not 1");
    x = x.squeeze(d);
  }
  return {x};
}

V flatten_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  int64_t axis = a.i("axis", 1);
  if (axis < 0) axis += x.dim();
  if (axis < 0 || axis > x.dim()) throw a.error("axis out of range");
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
  return {x.reshape({outer, outer == 0 ? 0 : x.numel() / outer})};
}

// Bidirectional broadcast of x with the given shape.
V expand_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  std::vector<int64_t> shape = a.values(1, "the shape");
  Shape out(std::max<size_t>(shape.size(), static_cast<size_t>(x.dim())), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t xs = i + x.dim() >= out.size() ? x.size(i + x.dim() - out.size()) : 1;
    const int64_t ss = i + shape.size() >= out.size() ? shape[i + shape.size() - out.size()] : 1;
    if (xs != ss && xs != 1 && ss != 1) {
      throw a.error("cannot broadcast " + shape_str(x.shape()) + " to " + shape_str(shape));
    }
    out[i] = xs == 1 ? ss : xs;
  }
  return {x.expand(out)};
}

V constant_of_shape(const NodeArgs& a) {
  const std::vector<int64_t> shape = a.values(0, "the shape");
  double v = 0;
  DType dt = DType::f32;
  if (const auto* attr = a.attr("value")) {
    Tensor t = tensor_of(attr->t(), "ConstantOfShape's value");
    if (t.numel() != 1) throw a.error("value must have one element");
    v = t.item_double();
    dt = t.dtype();
  }
  // One value broadcast (a view of stride 0): the trace keeps it a broadcast of the shape,
  // which varies with the inputs' sizes, rather than a constant of this call's (capture).
  for (int64_t d : shape) {
    if (d < 0) throw a.error("a negative dim in the shape " + shape_str(Shape(shape)));
  }
  return {full({}, v, dt).expand(Shape(shape))};
}

V range_op(const NodeArgs& a) {
  const double start = a.scalar(0, "start"), limit = a.scalar(1, "limit");
  const double delta = a.scalar(2, "delta");
  if (delta == 0) throw a.error("delta is 0");
  return {arange(start, limit, delta, a.in(0).dtype())};
}

// The upper (or lower) triangle from diagonal k, zeros elsewhere.
V trilu_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dim() < 2) throw a.error("expected at least 2 dims");
  const int64_t k = a.has(1) ? static_cast<int64_t>(a.scalar(1, "k")) : 0;
  const int64_t rows = x.size(-2), cols = x.size(-1);
  Tensor diff = arange(cols).reshape({1, cols}) - arange(rows).reshape({rows, 1});  // j - i
  Tensor keep =
      a.i("upper", 1) != 0 ? ge(diff, static_cast<double>(k)) : le(diff, static_cast<double>(k));
  if (!x.device().is_cpu()) keep = keep.to(x.device());  // the mask meets x where it is
  return {where(keep, x, zeros({}, x.dtype()))};
}

// Values are taken from the node's attribute at load (model.cpp): never run.
V constant_op(const NodeArgs& a) {
  throw a.error("a Constant is evaluated at load");
}

}  // namespace

void add_shape_rules(std::vector<OpRule>& r) {
  r.push_back({"Shape", shape_op, {"start", "end"}});
  r.push_back({"Reshape", reshape_op, {"allowzero"}, {1}});
  r.push_back({"Transpose", transpose_op, {"perm"}});
  r.push_back({"Slice", slice_op, {}, {1, 2, 3, 4}});
  r.push_back({"Concat", concat_op, {"axis"}});
  r.push_back({"Split", split_op, {"axis", "num_outputs"}, {1}});
  r.push_back({"Gather", gather_op, {"axis"}, {1}});
  r.push_back({"Unsqueeze", unsqueeze_op, {}, {1}});
  r.push_back({"Squeeze", squeeze_op, {}, {1}});
  r.push_back({"Flatten", flatten_op, {"axis"}});
  r.push_back({"Expand", expand_op, {}, {1}});
  r.push_back({"ConstantOfShape", constant_of_shape, {"value"}, {0}});
  r.push_back({"Range", range_op, {}, {0, 1, 2}});
  r.push_back({"Trilu", trilu_op, {"upper"}, {1}});
  r.push_back({"Constant",
               constant_op,
               {"value", "value_float", "value_floats", "value_int", "value_ints"}});
}

}  // namespace zc::onnx_import
