// Resize (opsets 13, 18, 19). Resizing is separable: each output element along an axis reads
// the input along that axis only, at positions and with weights that depend on the sizes
// alone, which are known when the node runs (also during a trace). So each resized axis is one
// map built here on the CPU: the input index of each output for nearest (a gather of rows), an
// [out, in] matrix of weights for linear and cubic (a matrix product). The numbers follow ONNX
// Runtime's CPU kernel, float for float, where the specification leaves them open (the rounding
// of coordinates, an axis of scale 1 left as it is, antialiasing's filter windows).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

enum class Mode { nearest, linear, cubic };
enum class Transform {
  half_pixel,
  half_pixel_symmetric,
  pytorch_half_pixel,
  align_corners,
  asymmetric,
  tf_crop_and_resize,
  tf_half_pixel_for_nn,
};
enum class Rounding { round_prefer_floor, round_prefer_ceil, floor, ceil };

// A string attribute as one of its values, or a zc::Error listing them.
template <class E>
E choose(const NodeArgs& a, const char* attr, const std::string& fallback,
         std::initializer_list<std::pair<const char*, E>> values) {
  const std::string v = a.s(attr, fallback);
  std::string names;
  for (const auto& [name, e] : values) {
    if (v == name) return e;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  throw a.error(std::string(attr) + " '" + v + "' is not one of " + names);
}

struct Options {
  Mode mode;
  Transform transform;
  Rounding rounding;
  float cubic_a;
  bool exclude_outside;
  bool antialias;
  float extrapolation;
};

Options options_of(const NodeArgs& a) {
  Options o;
  o.mode =
      choose<Mode>(a, "mode", "nearest",
                   {{"nearest", Mode::nearest}, {"linear", Mode::linear}, {"cubic", Mode::cubic}});
  o.transform = choose<Transform>(a, "coordinate_transformation_mode", "half_pixel",
                                  {{"half_pixel", Transform::half_pixel},
                                   {"half_pixel_symmetric", Transform::half_pixel_symmetric},
                                   {"pytorch_half_pixel", Transform::pytorch_half_pixel},
                                   {"align_corners", Transform::align_corners},
                                   {"asymmetric", Transform::asymmetric},
                                   {"tf_crop_and_resize", Transform::tf_crop_and_resize},
                                   {"tf_half_pixel_for_nn", Transform::tf_half_pixel_for_nn}});
  o.rounding = choose<Rounding>(a, "nearest_mode", "round_prefer_floor",
                                {{"round_prefer_floor", Rounding::round_prefer_floor},
                                 {"round_prefer_ceil", Rounding::round_prefer_ceil},
                                 {"floor", Rounding::floor},
                                 {"ceil", Rounding::ceil}});
  o.cubic_a = a.f("cubic_coeff_a", -0.75f);
  o.exclude_outside = a.i("exclude_outside", 0) != 0;
  // Antialiasing filters linear and cubic resizes only; nearest is unchanged by it.
  o.antialias = a.i("antialias", 0) != 0 && o.mode != Mode::nearest;
  o.extrapolation = a.f("extrapolation_value", 0.0f);
  return o;
}

// One axis: its lengths, the scale its coordinates map by, its region (tf_crop_and_resize).
struct Axis {
  int64_t in, out;
  float scale;
  float roi_start, roi_end;
};

// The input coordinate of output position i, in float as ONNX Runtime computes it.
float original(Transform t, const Axis& ax, int64_t i) {
  const float x = static_cast<float>(i), scale = ax.scale;
  const float len_out = static_cast<float>(ax.out), len_in = static_cast<float>(ax.in);
  switch (t) {
    case Transform::asymmetric:
      return x / scale;
    case Transform::pytorch_half_pixel:
      return len_out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case Transform::tf_half_pixel_for_nn:
      return (x + 0.5f) / scale;
    case Transform::align_corners:
      return len_out == 1 ? 0.0f : x * (len_in - 1) / (len_out - 1);
    case Transform::tf_crop_and_resize:
      return len_out > 1 ? ax.roi_start * (len_in - 1) +
                               (x * (ax.roi_end - ax.roi_start) * (len_in - 1)) / (len_out - 1)
                         : static_cast<float>(0.5 * (ax.roi_start + ax.roi_end) * (len_in - 1));
    case Transform::half_pixel_symmetric: {
      const float adjustment = len_out / (scale * len_in);
      const float offset = len_in / 2 * (1 - adjustment);
      return static_cast<float>(offset + (x + 0.5) / scale - 0.5);
    }
    case Transform::half_pixel:
      break;
  }
  return (x + 0.5f) / scale - 0.5f;
}

// The nearest input index of a coordinate. ONNX Runtime takes a coordinate within 1e-6 of a
// half as the half, so that one computed as 3.4999998 for 3.5 rounds as 3.5 does.
int64_t nearest(Rounding r, float x) {
  const float whole = std::floor(x);
  if (r == Rounding::floor) return static_cast<int64_t>(whole);
  if (r == Rounding::ceil) return static_cast<int64_t>(std::ceil(x));
  if (std::fabs(x - whole - 0.5f) < 1e-6f) {
    return static_cast<int64_t>(whole) + (r == Rounding::round_prefer_ceil ? 1 : 0);
  }
  return static_cast<int64_t>(std::round(x));
}

// Keys' cubic convolution weights of the four inputs around a coordinate whose fraction is s.
std::array<float, 4> cubic_weights(float s, float a) {
  s = std::fabs(s);
  return {((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a,
          ((a + 2) * s - (a + 3)) * s * s + 1,
          ((a + 2) * (1 - s) - (a + 3)) * (1 - s) * (1 - s) + 1,
          ((a * (2 - s) - 5 * a) * (2 - s) + 8 * a) * (2 - s) - 4 * a};
}

// The filters antialiasing spreads over the input (Pillow's, as ONNX Runtime's).
float filter(Mode m, float a, float x) {
  x = std::fabs(x);
  if (m == Mode::linear) return x < 1 ? 1 - x : 0.0f;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0f;
}

// What one axis does: an input index per output (nearest) or an [out, in] row-major matrix of
// weights (linear, cubic), and whether each output's coordinate lies inside the input (outside,
// tf_crop_and_resize gives extrapolation_value).
struct AxisMap {
  std::vector<int64_t> index;
  std::vector<float> weights;
  std::vector<bool> inside;
};

// Linear and cubic with antialias: the filter widened by 1/scale when shrinking, so that every
// input contributes; inputs past an edge count as the edge's (or not at all with
// exclude_outside), and each row is normalized.
void antialias_row(const Options& o, const Axis& ax, int64_t i, float* row) {
  const float scale = 1.0f / ax.scale;  // input pixels per output pixel
  const float support_size = o.mode == Mode::linear ? 2.0f : 4.0f;
  const float support = scale >= 1.0f ? support_size * 0.5f * scale : support_size * 0.5f;
  const int64_t window = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const float inv_scale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  const float center =
      0.5f + (scale == 1.0f ? static_cast<float>(i) : original(o.transform, ax, i));
  const int64_t lo = static_cast<int64_t>(std::floor(center - support + 0.5f));
  const int64_t hi =
      lo + std::clamp<int64_t>(static_cast<int64_t>(std::floor(center + support + 0.5f)) - lo, 0,
                               window);
  const int64_t lo_cut = std::clamp<int64_t>(lo, 0, ax.in),
                hi_cut = std::clamp<int64_t>(hi, 0, ax.in);
  if (lo_cut >= hi_cut) return;  // the window misses the input: a row of zeros
  const int64_t from = o.exclude_outside ? lo_cut : lo, to = o.exclude_outside ? hi_cut : hi;
  std::vector<float> w;
  float total = 0.0f;
  for (int64_t j = from; j < to; ++j) {
    w.push_back(filter(o.mode, o.cubic_a, (static_cast<float>(j) - center + 0.5f) * inv_scale));
    total += w.back();
  }
  const float inv_total = total == 0.0f ? 1.0f : 1.0f / total;
  for (int64_t j = from; j < to; ++j) {
    row[std::clamp<int64_t>(j, 0, ax.in - 1)] += w[static_cast<size_t>(j - from)] * inv_total;
  }
}

AxisMap axis_map(const Options& o, const Axis& ax) {
  AxisMap m;
  const size_t out = static_cast<size_t>(ax.out);
  m.inside.resize(out);
  if (o.mode == Mode::nearest) {
    m.index.resize(out);
  } else {
    m.weights.assign(out * static_cast<size_t>(ax.in), 0.0f);
  }
  const float last = static_cast<float>(ax.in - 1);
  for (int64_t i = 0; i < ax.out; ++i) {
    // An axis of scale 1 keeps its positions, whatever the transform would say.
    const float x = ax.scale == 1.0f ? static_cast<float>(i) : original(o.transform, ax, i);
    m.inside[static_cast<size_t>(i)] = x >= 0 && x <= last;
    float* row = m.weights.empty() ? nullptr : m.weights.data() + static_cast<size_t>(i * ax.in);
    if (o.mode == Mode::nearest) {
      m.index[static_cast<size_t>(i)] = std::clamp<int64_t>(nearest(o.rounding, x), 0, ax.in - 1);
    } else if (o.antialias) {
      antialias_row(o, ax, i, row);
    } else if (o.mode == Mode::linear) {
      const float v = std::max(0.0f, std::min(x, last));
      const int64_t x1 = std::min(static_cast<int64_t>(v), ax.in - 1);
      const int64_t x2 = std::min(x1 + 1, ax.in - 1);
      float d1 = std::fabs(v - static_cast<float>(x1)), d2 = std::fabs(v - static_cast<float>(x2));
      if (x1 == x2) d1 = d2 = 0.5f;
      row[x1] += d2;
      row[x2] += d1;
    } else {
      // Cubic: the four inputs around x, past an edge as the edge, or left out with
      // exclude_outside and the others renormalized (ONNX Runtime normalizes only then).
      const int64_t base = static_cast<int64_t>(std::floor(x));
      const std::array<float, 4> c = cubic_weights(x - static_cast<float>(base), o.cubic_a);
      auto outside = [&](int64_t k) { return base - 1 + k < 0 || base - 1 + k >= ax.in; };
      float total = 1.0f;
      if (o.exclude_outside) {
        total = 0.0f;
        for (int64_t k = 0; k < 4; ++k) total += outside(k) ? 0.0f : c[static_cast<size_t>(k)];
      }
      for (int64_t k = 0; k < 4; ++k) {
        if (o.exclude_outside && outside(k)) continue;
        row[std::clamp<int64_t>(base - 1 + k, 0, ax.in - 1)] += c[static_cast<size_t>(k)] / total;
      }
    }
  }
  return m;
}

// The dims of x as [before, n, after] around `axis`.
std::array<int64_t, 3> around(const Shape& s, int64_t axis) {
  int64_t before = 1, after = 1;
  for (int64_t d = 0; d < axis; ++d) before *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) after *= s[d];
  return {before, s[static_cast<size_t>(axis)], after};
}

Tensor on_device_of(Tensor t, const Tensor& x) {
  return x.device().is_cpu() ? t : t.to(x.device());
}

// Output i along `axis` is input index[i]: rows of x with the axis first.
Tensor gather_axis(const Tensor& x, int64_t axis, const std::vector<int64_t>& index) {
  const auto [before, n, after] = around(x.shape(), axis);
  const int64_t out = static_cast<int64_t>(index.size());
  Tensor k = Tensor::empty({out}, DType::i64);
  std::memcpy(k.raw_data(), index.data(), index.size() * sizeof(int64_t));
  Tensor rows = x.reshape({before, n, after}).permute({1, 0, 2}).reshape({n, before * after});
  Tensor y = embedding(rows, on_device_of(k, x)).reshape({out, before, after}).permute({1, 0, 2});
  Shape shape = x.shape();
  shape[static_cast<size_t>(axis)] = out;
  return y.reshape(shape);
}

// Output i along `axis` is the sum of the inputs along it weighted by row i of `weights`: a
// product with the matrix, on the right when the axis is the last.
Tensor weigh_axis(const Tensor& x, int64_t axis, const std::vector<float>& weights, int64_t out) {
  const auto [before, n, after] = around(x.shape(), axis);
  Tensor m = on_device_of(from_vector(weights, {out, n}).to(x.dtype()), x);
  Shape shape = x.shape();
  shape[static_cast<size_t>(axis)] = out;
  if (after == 1) return matmul(x.reshape({before, n}), m.t()).reshape(shape);
  return matmul(m, x.reshape({before, n, after})).reshape(shape);
}

int64_t axis_in(const NodeArgs& a, int64_t axis, int64_t rank) {
  const int64_t r = axis < 0 ? axis + rank : axis;
  if (r < 0 || r >= rank) {
    throw a.error("axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(rank));
  }
  return r;
}

// The axes the node names: `axes` (opset 18, negative ones counted from the end), else all.
std::vector<int64_t> named_axes(const NodeArgs& a, int64_t rank) {
  std::vector<int64_t> axes = a.ints("axes");
  if (axes.empty()) {
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  std::vector<bool> seen(static_cast<size_t>(rank));
  for (int64_t& d : axes) {
    d = axis_in(a, d, rank);
    if (seen[static_cast<size_t>(d)]) {
      throw a.error("axes name dim " + std::to_string(d) + " twice");
    }
    seen[static_cast<size_t>(d)] = true;
  }
  return axes;
}

// Every dim of x as an Axis: from the scales (output length floor(scale * in), in float) or
// the sizes (scale out / in), keep_aspect_ratio_policy (opset 18) taking one scale for the
// named axes, and the roi for tf_crop_and_resize. roi, scales and sizes list the named axes.
std::vector<Axis> plan(const NodeArgs& a, const Tensor& x, Transform transform) {
  const int64_t rank = x.dim();
  const std::vector<int64_t> axes = named_axes(a, rank);
  const size_t n = axes.size();
  std::vector<Axis> dims;
  for (int64_t d = 0; d < rank; ++d) dims.push_back({x.size(d), x.size(d), 1.0f, 0.0f, 1.0f});
  auto named = [&](size_t k) -> Axis& { return dims[static_cast<size_t>(axes[k])]; };
  const bool by_scales = a.has(2) && a.in(2).numel() > 0;
  const bool by_sizes = a.has(3) && a.in(3).numel() > 0;
  if (by_scales == by_sizes) throw a.error("exactly one of scales and sizes must be given");
  if (by_scales) {
    const std::vector<double> scales = a.numbers(2, "scales");
    if (scales.size() != n) {
      throw a.error(std::to_string(scales.size()) + " scales for " + std::to_string(n) + " axes");
    }
    for (size_t k = 0; k < n; ++k) {
      Axis& ax = named(k);
      ax.scale = static_cast<float>(scales[k]);
      if (!(ax.scale > 0)) {
        throw a.error("scales must be positive, got " + std::to_string(scales[k]));
      }
      ax.out = static_cast<int64_t>(ax.scale * static_cast<float>(ax.in));
    }
  } else {
    const std::vector<int64_t> sizes = a.values(3, "sizes");
    if (sizes.size() != n) {
      throw a.error(std::to_string(sizes.size()) + " sizes for " + std::to_string(n) + " axes");
    }
    for (size_t k = 0; k < n; ++k) {
      Axis& ax = named(k);
      if (sizes[k] < 0 || (ax.in == 0 && sizes[k] != 0)) {
        throw a.error("a dim of " + std::to_string(ax.in) + " cannot be resized to " +
                      std::to_string(sizes[k]));
      }
      ax.out = sizes[k];
      ax.scale = ax.in == 0 ? 1.0f : static_cast<float>(ax.out) / static_cast<float>(ax.in);
    }
    const std::string policy = a.s("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger" || policy == "not_smaller") {
      // One scale for the named axes: the smallest (the output fits in `sizes`) or the largest
      // (it covers them); each length is its input's times that scale, rounded.
      const bool smallest = policy == "not_larger";
      float s = smallest ? std::numeric_limits<float>::max() : 0.0f;
      for (size_t k = 0; k < n; ++k)
        s = smallest ? std::min(s, named(k).scale) : std::max(s, named(k).scale);
      for (size_t k = 0; k < n; ++k) {
        named(k).scale = s;
        named(k).out = static_cast<int64_t>(std::round(s * static_cast<float>(named(k).in)));
      }
    } else if (policy != "stretch") {
      throw a.error("keep_aspect_ratio_policy '" + policy +
                    "' is not one of stretch, not_larger, not_smaller");
    }
  }
  if (transform == Transform::tf_crop_and_resize && a.has(1) && a.in(1).numel() > 0) {
    const std::vector<double> roi = a.numbers(1, "roi");
    if (roi.size() != 2 * n) {
      throw a.error(std::to_string(roi.size()) + " roi values for " + std::to_string(n) +
                    " axes (a start and an end each)");
    }
    for (size_t k = 0; k < n; ++k) {
      named(k).roi_start = static_cast<float>(roi[k]);
      named(k).roi_end = static_cast<float>(roi[n + k]);
    }
  }
  return dims;
}

// Inputs: X, roi, scales, sizes (one of scales and sizes). An output of the input's shape is
// the input (as ONNX Runtime's, whatever the scales); else each axis of a scale other than 1
// is resized in turn, and tf_crop_and_resize puts extrapolation_value where a coordinate falls
// outside the input.
V resize_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const Options o = options_of(a);
  if (x.dim() == 0) throw a.error("the input has no dims to resize");
  const std::vector<Axis> dims = plan(a, x, o.transform);
  Shape out;
  for (const Axis& ax : dims) out.push_back(ax.out);
  if (out == x.shape()) return {x};
  if (o.mode != Mode::nearest && !is_floating(x.dtype())) {
    throw a.error("linear and cubic resizes need a floating-point input, got " +
                  std::string(dtype_name(x.dtype())) +
                  " (ONNX Runtime truncates or rounds by case)");
  }
  if (std::find(out.begin(), out.end(), 0) != out.end()) {
    return {zeros(out, x.dtype(), x.device())};
  }
  Tensor y = x, inside;  // inside: 1 where every coordinate lies inside the input
  for (int64_t d = 0; d < x.dim(); ++d) {
    const Axis& ax = dims[static_cast<size_t>(d)];
    if (ax.scale == 1.0f) continue;
    const AxisMap m = axis_map(o, ax);
    // Antialiasing leaves an axis of its own length as it is (its weights are not the identity
    // when the scale is not 1), as ONNX Runtime does.
    if (o.mode == Mode::nearest) {
      y = gather_axis(y, d, m.index);
    } else if (!(o.antialias && ax.out == ax.in)) {
      y = weigh_axis(y, d, m.weights, ax.out);
    }
    if (o.transform == Transform::tf_crop_and_resize &&
        std::find(m.inside.begin(), m.inside.end(), false) != m.inside.end()) {
      Shape s(static_cast<size_t>(x.dim()), 1);
      s[static_cast<size_t>(d)] = ax.out;
      Tensor t = on_device_of(from_vector({m.inside.begin(), m.inside.end()}, s), x);
      inside = inside.defined() ? inside * t : t;
    }
  }
  if (inside.defined()) {
    y = where(gt(inside, 0.5), y, on_device_of(full({}, o.extrapolation, y.dtype()), x));
  }
  return {y};
}

}  // namespace

void add_resize_rules(std::vector<OpRule>& r) {
  r.push_back(
      {"Resize",
       resize_op,
       {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
        "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"},
       {1, 2, 3}});
}

}  // namespace zc::onnx_import
