// GridSample (opsets 16 and 20) as a composition of zc's ops. Each output point reads X at the
// position the grid gives, unnormalized per spatial dim: align_corners maps -1 and 1 to the
// centres of the first and last pixels, otherwise to their outer edges. Around that position lie
// the taps: along each dim the nearest integer (halves to even), the two neighbours of linear or
// the four of cubic (Keys' kernel, a = -0.75), and every combination of one per dim. X is viewed
// as a table of rows [N * spatial, C], each tap's row number computed from the grid with zc's
// arithmetic (so a grid computed from the model's inputs is traced as any value), gathered by an
// embedding lookup and blended with the taps' weights one dim at a time, innermost first, in
// the order ONNX Runtime sums them.
//
// Padding applies to each tap's index, not to the position, as in ONNX Runtime's CPU kernel and
// in torch: zeros masks the taps outside X (their row clamped into it, so that the lookup stays
// in range), border clamps them, reflection folds them back into X as mirror images about its
// border (the edge pixels' outer edges, or their centres with align_corners). That is the same
// as padding the position first, which the ONNX specification's reference does, but for cubic
// with border padding: there the reference clamps the position to the border before taking the
// taps and differs near it; zc follows ONNX Runtime and torch.
#include <string>
#include <vector>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

enum class Mode { linear, nearest, cubic };
enum class Padding { zeros, border, reflection };

// The mode by the names of the file's opset: 16 wrote bilinear and bicubic, 20 linear and cubic.
Mode mode_of(const NodeArgs& a) {
  const bool named_20 = a.opset >= 20;
  const std::string v = a.s("mode", named_20 ? "linear" : "bilinear");
  if (v == "nearest") return Mode::nearest;
  if (v == (named_20 ? "linear" : "bilinear")) return Mode::linear;
  if (v == (named_20 ? "cubic" : "bicubic")) return Mode::cubic;
  throw a.error("mode '" + v + "' is not one of " +
                (named_20 ? "linear, nearest, cubic (the names from opset 20; "
                            "bilinear and bicubic are opset 16's)"
                          : "bilinear, nearest, bicubic (the names before opset 20; "
                            "linear and cubic are opset 20's)") +
                ", in a file of opset " + std::to_string(a.opset));
}

Padding padding_of(const NodeArgs& a) {
  const std::string v = a.s("padding_mode", "zeros");
  if (v == "zeros") return Padding::zeros;
  if (v == "border") return Padding::border;
  if (v == "reflection") return Padding::reflection;
  throw a.error("padding_mode '" + v + "' is not one of zeros, border, reflection");
}

// One tap along one dim: its index into that dim (i64, in range), whether it lies inside X
// (zeros padding; undefined otherwise) and its weight (undefined for nearest).
struct Tap {
  Tensor index, inside, weight;
};

// The taps' indices k (i64) padded into [0, len).
Tensor padded(const Tensor& k, int64_t len, Padding padding, bool align, Tensor* inside) {
  const Device dev = k.device();
  switch (padding) {
    case Padding::zeros:
      *inside =
          where(ge(k, 0.0), lt(k, static_cast<double>(len)), scalar_on(0, DType::boolean, dev));
      return where(*inside, k, scalar_on(0, DType::i64, dev));
    case Padding::border:
      return clamp(k, 0.0, static_cast<double>(len - 1));
    case Padding::reflection:
      break;
  }
  // Mirrored about -1/2 and len - 1/2 (about 0 and len - 1 with align_corners) until inside:
  // for an integer, the residue modulo one period folded in half, which is the index ONNX
  // Runtime's repeated reflection of it gives. In a dim of one pixel every tap is that pixel
  // (with align_corners the period would be 0).
  if (len == 1) return clamp(k, 0.0, 0.0);
  const int64_t period = align ? 2 * (len - 1) : 2 * len;
  const Tensor m = remainder(k, static_cast<double>(period));
  if (align) return where(gt(m, static_cast<double>(len - 1)), static_cast<double>(period) - m, m);
  return where(ge(m, static_cast<double>(len)), static_cast<double>(period - 1) - m, m);
}

// Keys' cubic convolution weights of the taps at -1, 0, 1, 2 from floor(x), t = x - floor(x),
// written as ONNX Runtime writes them (a = -0.75).
std::vector<Tensor> cubic_weights(const Tensor& t) {
  const auto outer = [](const Tensor& s) {  // |s| in [1, 2]
    return ((-0.75 * s + 3.75) * s - 6.0) * s + 3.0;
  };
  const auto inner = [](const Tensor& s) {  // |s| in [0, 1]
    return (1.25 * s - 2.25) * s * s + 1.0;
  };
  const Tensor u = 1.0 - t;
  return {outer(t + 1.0), inner(t), inner(u), outer(2.0 - t)};
}

// The taps along a dim of `len` of the unnormalized positions `pos`.
std::vector<Tap> taps_of(const Tensor& pos, int64_t len, Mode mode, Padding padding, bool align) {
  std::vector<Tap> taps;
  const auto add = [&](const Tensor& k, const Tensor& weight) {
    Tap t;
    t.index = padded(k, len, padding, align, &t.inside);
    t.weight = weight;
    taps.push_back(std::move(t));
  };
  if (mode == Mode::nearest) {
    add(cast(round(pos), DType::i64), Tensor());
    return taps;
  }
  const Tensor fl = floor(pos), k = cast(fl, DType::i64);
  if (mode == Mode::linear) {
    add(k, (fl + 1.0) - pos);
    add(k + 1.0, pos - fl);
    return taps;
  }
  // ONNX Runtime takes t as x - (floor(x) - 1) - 1, rounding where x - floor(x) would not.
  const std::vector<Tensor> w = cubic_weights((pos - (fl - 1.0)) - 1.0);
  for (int64_t j = 0; j < 4; ++j) add(k + static_cast<double>(j - 1), w[static_cast<size_t>(j)]);
  return taps;
}

struct Sampling {
  Tensor table;  // X as rows [N * spatial, C]
  Shape spatial;
  std::vector<std::vector<Tap>> taps;  // per spatial dim, outermost first
  DType compute;                       // the dtype taps are blended in
};

// The sum over the taps of dims d and on of their weights times the rows at them; `row` is the
// row number so far (the batch's and the outer dims' taps), `inside` whether those taps lie in X.
Tensor blend(const Sampling& s, size_t d, const Tensor& row, const Tensor& inside) {
  const Device dev = s.table.device();
  Tensor out;
  for (const Tap& t : s.taps[d]) {
    const Tensor r = row.defined() ? row * static_cast<double>(s.spatial[d]) + t.index : t.index;
    Tensor in = t.inside;
    if (inside.defined()) in = where(inside, in, scalar_on(0, DType::boolean, dev));
    Tensor v;
    if (d + 1 < s.taps.size()) {
      v = blend(s, d + 1, r, in);
    } else {
      v = embedding(s.table, r);
      if (in.defined()) v = where(in.unsqueeze(-1), v, scalar_on(0, v.dtype(), dev));
      if (t.weight.defined() && v.dtype() != s.compute) v = cast(v, s.compute);
    }
    if (t.weight.defined()) v = t.weight.unsqueeze(-1) * v;
    out = out.defined() ? out + v : v;
  }
  return out;
}

V grid_sample_op(const NodeArgs& a) {
  if (a.opset < 16) {
    throw a.error("GridSample is in the default domain from opset 16; the file's is " +
                  std::to_string(a.opset));
  }
  const Tensor& x = a.in(0);
  const Tensor& grid = a.in(1);
  const Mode mode = mode_of(a);
  const Padding padding = padding_of(a);
  const bool align = a.i("align_corners", 0) != 0;
  const int64_t rank = x.dim(), r = rank - 2;
  if (r < 1 || r > 3) {
    throw a.error("X " + shape_str(x.shape()) +
                  ": zc samples X of rank 4 [N, C, H, W] (and 3 and 5: 1 to 3 spatial dims), "
                  "with a grid [N, H_out, W_out, 2]");
  }
  if (grid.dim() != rank || grid.size(rank - 1) != r || grid.size(0) != x.size(0)) {
    throw a.error("grid " + shape_str(grid.shape()) + " for X " + shape_str(x.shape()) +
                  " (expected rank " + std::to_string(rank) + ", [" + std::to_string(x.size(0)) +
                  ", output dims..., " + std::to_string(r) +
                  "]: X's batch first and one coordinate per spatial dim of X last)");
  }
  if (!is_floating(grid.dtype())) {
    throw a.error("grid must be floats, got " + std::string(dtype_name(grid.dtype())));
  }
  if (mode != Mode::nearest && !is_floating(x.dtype())) {
    throw a.error(std::string(mode == Mode::linear ? "linear" : "cubic") + " sampling of " +
                  std::string(dtype_name(x.dtype())) + " (expected a float X; nearest takes any)");
  }
  const int64_t n = x.size(0), c = x.size(1);
  Shape out(grid.shape().begin(), grid.shape().end() - 1);
  out.insert(out.begin() + 1, c);
  Shape spatial(x.shape().begin() + 2, x.shape().end());
  int64_t count = 1, cells = 1;
  for (int64_t d : out) count *= d;
  for (int64_t d : spatial) cells *= d;
  if (count == 0) return {zeros(out, x.dtype(), x.device())};
  if (cells == 0) throw a.error("X " + shape_str(x.shape()) + " has an empty spatial dim");

  Sampling s;
  s.spatial = spatial;
  s.compute = x.dtype() == DType::f64 || grid.dtype() == DType::f64 ? DType::f64 : DType::f32;
  std::vector<int64_t> last{0};  // X as [N, spatial..., C]
  for (int64_t d = 2; d < rank; ++d) last.push_back(d);
  last.push_back(1);
  s.table = x.permute(last).reshape({n * cells, c});
  const Tensor g = grid.dtype() == s.compute ? grid : cast(grid, s.compute);
  for (int64_t d = 0; d < r; ++d) {
    // The grid's coordinates run the other way: x (the last dim of X) first.
    const int64_t len = spatial[static_cast<size_t>(d)];
    const Tensor gd = g.slice(rank - 1, r - 1 - d, r - d).squeeze(rank - 1);
    const Tensor pos = align ? (gd + 1.0) / 2.0 * static_cast<double>(len - 1)
                             : ((gd + 1.0) * static_cast<double>(len) - 1.0) / 2.0;
    s.taps.push_back(taps_of(pos, len, mode, padding, align));
  }
  Tensor batch;  // each point's batch index, the start of its row number
  if (n > 1) {
    Shape bs(static_cast<size_t>(rank - 1), 1);
    bs[0] = n;
    batch = arange(n).reshape(bs);
    if (!x.device().is_cpu()) batch = batch.to(x.device());
  }
  Tensor y = blend(s, 0, batch, Tensor());
  if (y.dtype() != x.dtype()) y = cast(y, x.dtype());
  std::vector<int64_t> back{0, rank - 1};  // [N, out..., C] to [N, C, out...]
  for (int64_t d = 1; d < rank - 1; ++d) back.push_back(d);
  return {y.permute(back)};
}

}  // namespace

void add_gridsample_rules(std::vector<OpRule>& r) {
  r.push_back({"GridSample", grid_sample_op, {"mode", "padding_mode", "align_corners"}});
}

}  // namespace zc::onnx_import
