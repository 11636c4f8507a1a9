#include "ops/window.h"

#include <algorithm>

#include "ops/derivative.h"
#include "ops/shape_rules.h"
#include "zc/factories.h"

namespace zc::ops {

int64_t window_out(int64_t n, int64_t k, int64_t s, int64_t before, int64_t after, int64_t d,
                   bool ceil_mode) {
  const int64_t span = n + before + after - (d * (k - 1) + 1);
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // A last window must start inside the input or its leading padding (torch's rule).
  if (ceil_mode && (out - 1) * s >= n + before) --out;
  return out;
}

int64_t Window2d::out_h(int64_t h) const {
  return window_out(h, kh, sh, pt, pb, dh, ceil_mode);
}
int64_t Window2d::out_w(int64_t w) const {
  return window_out(w, kw, sw, pl, pr, dw, ceil_mode);
}

Window2d conv_window(const Conv2dAttrs& a, int64_t kh, int64_t kw) {
  return Window2d{kh,           kw,          a.stride_h,   a.stride_w,   a.pad_top, a.pad_left,
                  a.pad_bottom, a.pad_right, a.dilation_h, a.dilation_w, false};
}

TensorMeta nhwc_as_nchw(TensorMeta m) {
  if (m.shape.size() == 4) m.shape = {m.shape[0], m.shape[3], m.shape[1], m.shape[2]};
  return m;
}

TensorMeta nchw_as_nhwc(TensorMeta m) {
  if (m.shape.size() == 4) m.shape = {m.shape[0], m.shape[2], m.shape[3], m.shape[1]};
  return m;
}

Window2d pool_window(const Pool2dAttrs& a) {
  return Window2d{a.kernel_h,   a.kernel_w,  a.stride_h,   a.stride_w,   a.pad_top,  a.pad_left,
                  a.pad_bottom, a.pad_right, a.dilation_h, a.dilation_w, a.ceil_mode};
}

void check_window(std::string_view op, const Shape& in, const Window2d& w) {
  if (in.size() != 4) {
    op_error(op, "expected an input [N, C, H, W], got " + shape_str(in));
  }
  if (w.kh < 1 || w.kw < 1 || w.sh < 1 || w.sw < 1 || w.dh < 1 || w.dw < 1) {
    op_error(op, "window sizes, strides and dilations must be positive");
  }
  if (w.pt < 0 || w.pl < 0 || w.pb < 0 || w.pr < 0) {
    op_error(op, "padding must not be negative");
  }
  const int64_t oh = w.out_h(in[2]), ow = w.out_w(in[3]);
  if (oh < 1 || ow < 1) {
    op_error(op, "a window of " + std::to_string(w.dh * (w.kh - 1) + 1) + "x" +
                     std::to_string(w.dw * (w.kw - 1) + 1) + " (dilated) does not fit the input " +
                     shape_str(in) + " with its padding; the output would be " +
                     std::to_string(oh) + "x" + std::to_string(ow));
  }
}

namespace {
// x with `len` elements of `value` added along dim (before or after).
Tensor pad_dim(const Tensor& x, int64_t dim, int64_t before, int64_t after, double value) {
  if (before == 0 && after == 0) return x;
  auto block = [&](int64_t len) {
    Shape shape = x.shape();
    shape[dim] = len;
    Tensor v = full({}, value, x.dtype());
    if (!x.is_traced() && !x.device().is_cpu()) v = v.to(x.device());
    return v.expand(shape);
  };
  std::vector<Tensor> parts;
  if (before > 0) parts.push_back(block(before));
  parts.push_back(x);
  if (after > 0) parts.push_back(block(after));
  return cat(parts, dim);
}

// The padded length the windows read along one dim.
int64_t padded_len(int64_t n, int64_t before, int64_t after, int64_t k, int64_t s, int64_t d,
                   int64_t out) {
  return std::max(n + before + after, (out - 1) * s + d * (k - 1) + 1);
}
}  // namespace

Tensor pad_for_windows(const Tensor& x, const Window2d& w, double value) {
  const int64_t h = x.shape()[2], width = x.shape()[3];
  const int64_t oh = w.out_h(h), ow = w.out_w(width);
  const int64_t hp = padded_len(h, w.pt, w.pb, w.kh, w.sh, w.dh, oh);
  const int64_t wp = padded_len(width, w.pl, w.pr, w.kw, w.sw, w.dw, ow);
  Tensor p = pad_dim(x, 2, w.pt, hp - h - w.pt, value);
  return pad_dim(p, 3, w.pl, wp - width - w.pl, value);
}

std::vector<Tensor> window_taps(const Tensor& padded, const Window2d& w, int64_t oh, int64_t ow) {
  std::vector<Tensor> taps;
  taps.reserve(static_cast<size_t>(w.kh * w.kw));
  for (int64_t i = 0; i < w.kh; ++i) {
    Tensor rows = padded.slice(2, i * w.dh, i * w.dh + (oh - 1) * w.sh + 1, w.sh);
    for (int64_t j = 0; j < w.kw; ++j) {
      taps.push_back(rows.slice(3, j * w.dw, j * w.dw + (ow - 1) * w.sw + 1, w.sw));
    }
  }
  return taps;
}

Tensor taps_backward(const std::vector<Tensor>& tap_grads, const Window2d& w, int64_t h,
                     int64_t width) {
  const int64_t oh = tap_grads[0].shape()[2], ow = tap_grads[0].shape()[3];
  const int64_t hp = padded_len(h, w.pt, w.pb, w.kh, w.sh, w.dh, oh);
  const int64_t wp = padded_len(width, w.pl, w.pr, w.kw, w.sw, w.dw, ow);
  Tensor total;
  for (int64_t i = 0; i < w.kh; ++i) {
    // The row's taps summed at full width first: one scatter along H per row of the window.
    Tensor row;
    for (int64_t j = 0; j < w.kw; ++j) {
      const Tensor& g = tap_grads[static_cast<size_t>(i * w.kw + j)];
      Tensor gw =
          slice_backward(g, wp, SliceAttrs{3, j * w.dw, j * w.dw + (ow - 1) * w.sw + 1, w.sw});
      row = row.defined() ? row + gw : gw;
    }
    Tensor gh =
        slice_backward(row, hp, SliceAttrs{2, i * w.dh, i * w.dh + (oh - 1) * w.sh + 1, w.sh});
    total = total.defined() ? total + gh : gh;
  }
  return total.slice(2, w.pt, w.pt + h).slice(3, w.pl, w.pl + width);
}

}  // namespace zc::ops
