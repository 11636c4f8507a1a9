// Operators that move elements without computing on them: Pad (constant, edge and reflect
// modes, negative pads crop), Tile, DepthToSpace and SpaceToDepth, and Size. Each is views,
// slices and concatenations of zc's layout ops, which compile to copy kernels.
#include <numeric>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

// `count` copies of x's element `at` along `axis`, each a slice of one.
std::vector<Tensor> rows_of(const Tensor& x, int64_t axis, const std::vector<int64_t>& at) {
  std::vector<Tensor> rows;
  for (int64_t k : at) rows.push_back(x.slice(axis, k, k + 1));
  return rows;
}

// x grown by `before` and `after` along `axis` as `mode` says (both non-negative).
Tensor pad_axis(const NodeArgs& a, const Tensor& x, int64_t axis, int64_t before, int64_t after,
                const std::string& mode, double value) {
  const int64_t n = x.size(axis);
  std::vector<Tensor> parts;
  auto block = [&](int64_t count) {  // on x's device, which the concatenation needs
    Shape s = x.shape();
    s[static_cast<size_t>(axis)] = count;
    // One value broadcast: a view of stride 0, which the trace keeps a broadcast (capture).
    return full({}, value, x.dtype()).to(x.device()).expand(s);
  };
  std::vector<int64_t> head, tail;
  if (mode == "edge") {
    if (n == 0) throw a.error("edge padding of an empty dim");
    head.assign(static_cast<size_t>(before), 0);
    tail.assign(static_cast<size_t>(after), n - 1);
  } else if (mode == "reflect") {
    // The rows mirrored about the first and last, which are not repeated.
    if (before >= n || after >= n) {
      throw a.error("reflect padding of " + std::to_string(std::max(before, after)) +
                    " on a dim of " + std::to_string(n) + " (it must be smaller)");
    }
    for (int64_t k = before; k >= 1; --k) head.push_back(k);
    for (int64_t k = 1; k <= after; ++k) tail.push_back(n - 1 - k);
  }
  if (mode == "constant") {
    if (before > 0) parts.push_back(block(before));
  } else {
    for (Tensor& t : rows_of(x, axis, head)) parts.push_back(std::move(t));
  }
  parts.push_back(x);
  if (mode == "constant") {
    if (after > 0) parts.push_back(block(after));
  } else {
    for (Tensor& t : rows_of(x, axis, tail)) parts.push_back(std::move(t));
  }
  return parts.size() == 1 ? x : cat(parts, axis);
}

// pads [begin per axis..., end per axis...] over every axis or those of the `axes` input
// (opset 18); a negative pad removes elements.
V pad_op(const NodeArgs& a) {
  Tensor x = a.in(0);
  const std::string mode = a.s("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") {
    throw a.error("mode '" + mode + "' is not supported (constant, edge and reflect are)");
  }
  const std::vector<int64_t> pads = a.values(1, "pads");
  const double value = a.has(2) ? a.scalar(2, "constant_value") : 0.0;
  std::vector<int64_t> axes;
  if (a.has(3)) {
    for (int64_t d : a.values(3, "axes")) axes.push_back(a.axis(d, x.dim()));
  } else {
    axes.resize(static_cast<size_t>(x.dim()));
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (pads.size() != 2 * axes.size()) {
    throw a.error(std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) +
                  " axes (expected two per axis)");
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i], before = pads[i], after = pads[i + axes.size()];
    const int64_t n = x.size(axis);
    if (-before - after > n) throw a.error("pads remove more than the dim holds");
    if (before < 0) x = x.slice(axis, -before, n);
    if (after < 0) x = x.slice(axis, 0, x.size(axis) + after);
    x = pad_axis(a, x, axis, std::max<int64_t>(before, 0), std::max<int64_t>(after, 0), mode,
                 value);
  }
  return {x};
}

// Each dim repeated `repeats` times: x [d0, d1, ...] viewed as [1, d0, 1, d1, ...], broadcast
// to [r0, d0, r1, d1, ...] and read back as [r0 d0, r1 d1, ...].
V tile_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const std::vector<int64_t> repeats = a.values(1, "repeats");
  if (static_cast<int64_t>(repeats.size()) != x.dim()) {
    throw a.error(std::to_string(repeats.size()) + " repeats for a tensor of rank " +
                  std::to_string(x.dim()));
  }
  Shape spread, expanded, out;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t r = repeats[static_cast<size_t>(d)];
    if (r < 0) throw a.error("a negative repeat");
    spread.insert(spread.end(), {1, x.size(d)});
    expanded.insert(expanded.end(), {r, x.size(d)});
    out.push_back(r * x.size(d));
  }
  return {x.reshape(spread).expand(expanded).contiguous().reshape(out)};
}

// [N, C, H, W] to [N, C / b^2, H b, W b]: DCR takes the channels depth-major, CRD
// column-row-major (ONNX's two modes).
V depth_to_space(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const int64_t b = a.i("blocksize", 0);
  if (x.dim() != 4 || b < 1 || x.size(1) % (b * b) != 0) {
    throw a.error("expected [N, C, H, W] with C a multiple of blocksize^2, got " +
                  shape_str(x.shape()) + " and blocksize " + std::to_string(b));
  }
  const int64_t n = x.size(0), c = x.size(1) / (b * b), h = x.size(2), w = x.size(3);
  const std::string mode = a.s("mode", "DCR");
  Tensor y;
  if (mode == "DCR") {
    y = x.reshape({n, b, b, c, h, w}).permute({0, 3, 4, 1, 5, 2});
  } else if (mode == "CRD") {
    y = x.reshape({n, c, b, b, h, w}).permute({0, 1, 4, 2, 5, 3});
  } else {
    throw a.error("mode '" + mode + "'");
  }
  return {y.contiguous().reshape({n, c, h * b, w * b})};
}

// DepthToSpace's DCR inverse: [N, C, H, W] to [N, C b^2, H / b, W / b].
V space_to_depth(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const int64_t b = a.i("blocksize", 0);
  if (x.dim() != 4 || b < 1 || x.size(2) % b != 0 || x.size(3) % b != 0) {
    throw a.error("expected [N, C, H, W] with H and W multiples of blocksize, got " +
                  shape_str(x.shape()) + " and blocksize " + std::to_string(b));
  }
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2) / b, w = x.size(3) / b;
  return {x.reshape({n, c, h, b, w, b})
              .permute({0, 3, 5, 1, 2, 4})
              .contiguous()
              .reshape({n, c * b * b, h, w})};
}

// The element count, a 0-dim i64: known from the shape, also during a trace.
V size_op(const NodeArgs& a) {
  return {full({}, static_cast<double>(a.in(0).numel()), DType::i64)};
}

}  // namespace

void add_layout_rules(std::vector<OpRule>& r) {
  r.push_back({"Pad", pad_op, {"mode"}, {1, 2, 3}});
  r.push_back({"Tile", tile_op, {}, {1}});
  r.push_back({"DepthToSpace", depth_to_space, {"blocksize", "mode"}});
  r.push_back({"SpaceToDepth", space_to_depth, {"blocksize"}});
  r.push_back({"Size", size_op, {}});
}

}  // namespace zc::onnx_import
