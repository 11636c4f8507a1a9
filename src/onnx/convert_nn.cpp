// Convolutional-network and normalization operators: Conv and ConvTranspose (2-D, and 1-D as
// 2-D with height 1), BatchNormalization (inference), the pools, LayerNormalization.
#include <algorithm>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

// The pads [top, left, bottom, right] of a window over [N, C, H, W]: the attribute
// (ONNX orders them [h_begin, w_begin, h_end, w_end]), or what auto_pad asks for.
std::vector<int64_t> pads_of(const NodeArgs& a, const Shape& x, const std::vector<int64_t>& k,
                             const std::vector<int64_t>& s, const std::vector<int64_t>& d) {
  const std::string mode = a.s("auto_pad", "NOTSET");
  if (mode == "NOTSET") {
    std::vector<int64_t> p = a.ints("pads", {0, 0, 0, 0});
    if (p.size() != 4) throw a.error("pads must have 4 numbers for a 2-d window");
    return p;
  }
  if (mode == "VALID") return {0, 0, 0, 0};
  if (mode != "SAME_UPPER" && mode != "SAME_LOWER") throw a.error("auto_pad '" + mode + "'");
  std::vector<int64_t> p(4);
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x[2 + i], out = (in + s[i] - 1) / s[i];
    const int64_t total = std::max<int64_t>((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in, 0);
    const int64_t small = total / 2, large = total - small;
    p[i] = mode == "SAME_UPPER" ? small : large;
    p[i + 2] = mode == "SAME_UPPER" ? large : small;
  }
  return p;
}

std::vector<int64_t> pair_attr(const NodeArgs& a, const char* name) {
  std::vector<int64_t> v = a.ints(name, {1, 1});
  if (v.size() != 2) throw a.error(std::string(name) + " must have 2 numbers for a 2-d window");
  return v;
}

// A 1-d input [N, C, L] as [N, C, 1, L], so that 1-d windows run as 2-d ones of height 1.
bool as_2d(const Tensor& x) {
  return x.dim() == 3;
}

V conv(const NodeArgs& a) {
  Tensor x = a.in(0), w = a.in(1);
  const bool one_d = as_2d(x);
  if (one_d) {
    x = x.unsqueeze(2);
    w = w.unsqueeze(2);
  }
  if (x.dim() != 4)
    throw a.error("only 1-d and 2-d convolutions are supported, got input " +
                  shape_str(a.in(0).shape()));
  auto widen = [&](std::vector<int64_t> v, int64_t fill) {
    if (one_d) v.insert(v.begin(), fill);
    return v;
  };
  std::vector<int64_t> k = widen(a.ints("kernel_shape", {}), 1);
  if (k.empty() || (one_d && k.size() == 1)) k = {w.size(2), w.size(3)};
  if (k != std::vector<int64_t>{w.size(2), w.size(3)}) {
    throw a.error("kernel_shape does not match the weight " + shape_str(w.shape()));
  }
  const std::vector<int64_t> s = one_d ? widen(a.ints("strides", {1}), 1) : pair_attr(a, "strides");
  const std::vector<int64_t> d =
      one_d ? widen(a.ints("dilations", {1}), 1) : pair_attr(a, "dilations");
  std::vector<int64_t> p;
  if (one_d && a.s("auto_pad", "NOTSET") == "NOTSET") {
    std::vector<int64_t> p1 = a.ints("pads", {0, 0});
    if (p1.size() != 2) throw a.error("pads must have 2 numbers for a 1-d window");
    p = {0, p1[0], 0, p1[1]};
  } else {
    p = pads_of(a, x.shape(), k, s, d);
  }
  Tensor y = conv2d(x, w, a.has(2) ? a.in(2) : Tensor(), s, p, d, a.i("group", 1));
  return {one_d ? y.squeeze(2) : y};
}

// x [N, C, H, W] with s - 1 zeros after each element along `dim` (2 or 3) but the last:
// length (n - 1) s + 1, where a stride-s transposed convolution reads its input.
Tensor spread(const Tensor& x, int64_t dim, int64_t s) {
  if (s == 1) return x;
  const Tensor e = x.unsqueeze(dim + 1);
  Shape zs = e.shape();
  zs[static_cast<size_t>(dim + 1)] = s - 1;
  Shape shape = x.shape();
  const int64_t n = shape[static_cast<size_t>(dim)];
  shape[static_cast<size_t>(dim)] = n * s;
  return cat({e, zeros(zs, x.dtype(), x.device())}, dim + 1)
      .reshape(shape)
      .slice(dim, 0, (n - 1) * s + 1);
}

// t reversed along `dim` (a kernel's, a few elements).
Tensor flip(const Tensor& t, int64_t dim) {
  std::vector<Tensor> parts;
  for (int64_t i = t.size(dim) - 1; i >= 0; --i) parts.push_back(t.slice(dim, i, i + 1));
  return parts.size() == 1 ? t : cat(parts, dim);
}

// A transposed convolution's attributes, widened to (h, w) for a 1-d one; `shape` holds
// output_shape's spatial lengths (or nothing).
struct Transposed {
  std::vector<int64_t> k, s, d, extra, pads, shape;
  std::string auto_pad;
};

Transposed transposed_attrs(const NodeArgs& a, const Tensor& w, bool one_d) {
  const size_t rank = one_d ? 1 : 2;
  auto per_dim = [&](const char* name, int64_t fill) {
    std::vector<int64_t> v = a.ints(name, std::vector<int64_t>(rank, fill));
    if (v.size() != rank) {
      throw a.error(std::string(name) + " must have " + std::to_string(rank) + " number(s)");
    }
    if (one_d) v.insert(v.begin(), fill);
    return v;
  };
  Transposed t;
  t.k = {w.size(2), w.size(3)};
  if (a.attr("kernel_shape") && per_dim("kernel_shape", 1) != t.k) {
    throw a.error("kernel_shape does not match the weight " + shape_str(a.in(1).shape()));
  }
  t.s = per_dim("strides", 1);
  t.d = per_dim("dilations", 1);
  t.extra = per_dim("output_padding", 0);
  t.pads = a.ints("pads", std::vector<int64_t>(2 * rank, 0));
  if (t.pads.size() != 2 * rank) {
    throw a.error("pads must have " + std::to_string(2 * rank) + " numbers");
  }
  if (one_d) t.pads = {0, t.pads[0], 0, t.pads[1]};
  t.shape = a.ints("output_shape");
  if (!t.shape.empty() && t.shape.size() != rank && t.shape.size() != rank + 2) {
    throw a.error("output_shape must have " + std::to_string(rank) + " (or " +
                  std::to_string(rank + 2) + ") numbers");
  }
  if (t.shape.size() == rank + 2) t.shape.erase(t.shape.begin(), t.shape.begin() + 2);
  if (one_d && !t.shape.empty()) t.shape.insert(t.shape.begin(), 1);
  t.auto_pad = a.s("auto_pad", "NOTSET");
  if (t.auto_pad != "NOTSET" && t.auto_pad != "VALID" && t.auto_pad != "SAME_UPPER" &&
      t.auto_pad != "SAME_LOWER") {
    throw a.error("auto_pad '" + t.auto_pad + "'");
  }
  return t;
}

// What spatial dim i (0: h, 1: w) drops of the full output s (in - 1) + d (k - 1) + 1 +
// output_padding, before and after (after < 0 adds positions, where only the bias lands): the
// pads, or to output_shape's length or SAME's in * s, SAME_UPPER dropping less before.
std::pair<int64_t, int64_t> dropped(const NodeArgs& a, const Transposed& t, size_t i, int64_t in) {
  const int64_t full = t.s[i] * (in - 1) + t.d[i] * (t.k[i] - 1) + 1 + t.extra[i];
  int64_t head = t.pads[i], tail = t.pads[i + 2];
  if (!t.shape.empty() || t.auto_pad == "SAME_UPPER" || t.auto_pad == "SAME_LOWER") {
    // A stride past the kernel leaves SAME's output at `full` (ONNX Runtime's rule).
    const int64_t total =
        t.shape.empty() ? std::max<int64_t>(full - in * t.s[i], 0) : full - t.shape[i];
    head = total <= 0 ? 0 : t.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    tail = total - head;
  } else if (t.auto_pad == "VALID") {
    head = tail = 0;
  }
  if (full - head - tail < 1) {
    throw a.error("the output would have " + std::to_string(full - head - tail) +
                  " elements along spatial dim " + std::to_string(i));
  }
  return {head, tail};
}

// The transpose (gradient) of a convolution: each input element adds its weighted kernel to the
// output at stride s. That is a stride-1 convolution over the input spread with zeros, with the
// kernel flipped and its channels swapped per group, padded by the dilated kernel's reach less
// what the node drops of the full output.
V conv_transpose(const NodeArgs& a) {
  Tensor x = a.in(0), w = a.in(1);
  if (x.dim() == 5) {
    throw a.error("3-d transposed convolutions are not supported (1-d and 2-d are)");
  }
  const bool one_d = as_2d(x);
  if (one_d) {
    x = x.unsqueeze(2);
    w = w.unsqueeze(2);
  }
  if (x.dim() != 4 || w.dim() != 4) {
    throw a.error("expected an input [N, C, (H,) W] and a weight of its rank, got " +
                  shape_str(a.in(0).shape()) + " and " + shape_str(a.in(1).shape()));
  }
  const int64_t groups = a.i("group", 1), c = x.size(1);
  if (groups < 1 || c % groups != 0 || w.size(0) != c) {
    throw a.error("the weight " + shape_str(a.in(1).shape()) + " does not fit " +
                  std::to_string(c) + " input channels in " + std::to_string(groups) + " group(s)");
  }
  const Transposed t = transposed_attrs(a, w, one_d);
  Tensor xs = spread(spread(x, 2, t.s[0]), 3, t.s[1]);
  std::vector<int64_t> padding(4);  // top, left, bottom, right
  for (size_t i = 0; i < 2; ++i) {
    const int64_t dim = static_cast<int64_t>(i) + 2, reach = t.d[i] * (t.k[i] - 1);
    const auto [head, tail] = dropped(a, t, i, x.size(dim));
    const int64_t before = reach - head, after = reach - tail + t.extra[i];
    // Dropping past the kernel's reach crops the spread input instead.
    if (before < 0) xs = xs.slice(dim, -before, xs.size(dim));
    if (after < 0) xs = xs.slice(dim, 0, xs.size(dim) + after);
    padding[i] = std::max<int64_t>(before, 0);
    padding[i + 2] = std::max<int64_t>(after, 0);
  }
  // [C, M / g, kh, kw] to [M, C / g, kh, kw] per group, the kernel flipped.
  const int64_t per = w.size(1);
  Tensor wt = w.reshape({groups, c / groups, per, t.k[0], t.k[1]})
                  .permute({0, 2, 1, 3, 4})
                  .reshape({groups * per, c / groups, t.k[0], t.k[1]});
  wt = flip(flip(wt, 2), 3);
  Tensor y = conv2d(xs, wt, a.has(2) ? a.in(2) : Tensor(), {1, 1}, padding, t.d, groups);
  return {one_d ? y.squeeze(2) : y};
}

// Inference: the running statistics (training_mode, opset 14+, is not supported).
V batch_norm_op(const NodeArgs& a) {
  if (a.i("training_mode", 0) != 0 || a.outputs() > 1) {
    throw a.error("training mode (batch statistics and their outputs) is not supported");
  }
  return {
      batch_norm(a.in(0), a.in(3), a.in(4), a.in(1), a.in(2), false, 0.1, a.f("epsilon", 1e-5f))};
}

V pool(const NodeArgs& a, bool max) {
  const Tensor& x = a.in(0);
  if (x.dim() != 4) throw a.error("only 2-d pooling is supported, got " + shape_str(x.shape()));
  if (max && (a.outputs() > 1 || a.i("storage_order", 0) != 0)) {
    throw a.error("the Indices output (and storage_order) are not supported");
  }
  const std::vector<int64_t> k = a.ints("kernel_shape");
  if (k.size() != 2) throw a.error("kernel_shape must have 2 numbers");
  const std::vector<int64_t> s = pair_attr(a, "strides");
  const std::vector<int64_t> d = pair_attr(a, "dilations");
  // AveragePool takes dilations from opset 19; zc's average pool has none.
  if (!max && d != std::vector<int64_t>{1, 1}) {
    throw a.error("dilations other than 1 are not supported for AveragePool");
  }
  const std::vector<int64_t> p = pads_of(a, x.shape(), k, s, d);
  const bool ceil = a.i("ceil_mode", 0) != 0;
  if (max) return {max_pool2d(x, k, s, p, d, ceil)};
  return {avg_pool2d(x, k, s, p, ceil, a.i("count_include_pad", 0) != 0)};
}

V max_pool(const NodeArgs& a) {
  return pool(a, true);
}
V average_pool(const NodeArgs& a) {
  return pool(a, false);
}

std::vector<int64_t> spatial(const NodeArgs& a, const Tensor& x) {
  if (x.dim() < 3) throw a.error("expected an input [N, C, ...], got " + shape_str(x.shape()));
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

V global_average_pool(const NodeArgs& a) {
  return {mean(a.in(0), spatial(a, a.in(0)), true)};
}
V global_max_pool(const NodeArgs& a) {
  return {amax(a.in(0), spatial(a, a.in(0)), true)};
}

// Opset 17: over the dims from `axis` on; the Mean and InvStdDev outputs are training's.
V layer_norm_op(const NodeArgs& a) {
  if (a.outputs() > 1) throw a.error("the Mean and InvStdDev outputs are not supported");
  const Tensor& x = a.in(0);
  int64_t axis = a.i("axis", -1);
  if (axis < 0) axis += x.dim();
  if (axis < 0 || axis >= x.dim()) throw a.error("axis out of range for " + shape_str(x.shape()));
  const Shape normalized(x.shape().begin() + axis, x.shape().end());
  return {layer_norm(x, normalized, a.in(1), a.has(2) ? a.in(2) : Tensor(), a.f("epsilon", 1e-5f))};
}

// (x - mean) / sqrt(var + epsilon) over `dims` (biased variance, as every ONNX normalization).
Tensor normalized(const Tensor& x, const std::vector<int64_t>& dims, double epsilon) {
  const Tensor m = mean(x, dims, true);
  return (x - m) * rsqrt(var(x, dims, 0, true) + epsilon);
}

// A per-channel vector [C] as [C, 1, ...] against x [N, C, ...].
Tensor per_channel(const Tensor& v, const Tensor& x) {
  Shape s(static_cast<size_t>(x.dim() - 1), 1);
  s[0] = v.numel();
  return v.reshape(s);
}

// Each channel over its own spatial dims, then scaled and shifted per channel.
V instance_norm(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const Tensor y = normalized(x, spatial(a, x), a.f("epsilon", 1e-5f));
  return {y * per_channel(a.in(1), x) + per_channel(a.in(2), x)};
}

// Channels in `num_groups` groups, each normalized over its channels and spatial dims. The
// scale and bias are per group until opset 21 and per channel from it.
V group_norm(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  spatial(a, x);
  const int64_t groups = a.i("num_groups", 0), channels = x.size(1);
  if (groups < 1 || channels % groups != 0) {
    throw a.error(std::to_string(channels) + " channels do not make " + std::to_string(groups) +
                  " groups");
  }
  const Tensor g = x.reshape({x.size(0), groups, -1});
  const Tensor y = normalized(g, {2}, a.f("epsilon", 1e-5f)).reshape(x.shape());
  Tensor scale = a.in(1), bias = a.in(2);
  if (scale.numel() == groups && groups != channels) {
    // One value per group: repeated over the group's channels.
    const int64_t per = channels / groups;
    scale = scale.reshape({groups, 1}).expand({groups, per}).reshape({channels});
    bias = bias.reshape({groups, 1}).expand({groups, per}).reshape({channels});
  }
  if (scale.numel() != channels || bias.numel() != channels) {
    throw a.error("scale and bias must have one value per group or per channel");
  }
  return {y * per_channel(scale, x) + per_channel(bias, x)};
}

}  // namespace

void add_nn_rules(std::vector<OpRule>& r) {
  r.push_back(
      {"Conv", conv, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}});
  r.push_back({"ConvTranspose",
               conv_transpose,
               {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape",
                "pads", "strides"}});
  r.push_back({"BatchNormalization", batch_norm_op, {"epsilon", "momentum", "training_mode"}});
  r.push_back(
      {"MaxPool",
       max_pool,
       {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}});
  r.push_back({"AveragePool",
               average_pool,
               {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads",
                "strides"}});
  r.push_back({"GlobalAveragePool", global_average_pool, {}});
  r.push_back({"GlobalMaxPool", global_max_pool, {}});
  r.push_back({"LayerNormalization", layer_norm_op, {"axis", "epsilon", "stash_type"}});
  r.push_back({"InstanceNormalization", instance_norm, {"epsilon"}});
  r.push_back({"GroupNormalization", group_norm, {"epsilon", "num_groups", "stash_type"}});
}

}  // namespace zc::onnx_import
