// What conv2d and the 2-d pools share: the geometry of a window sliding over the last two dims
// of [N, C, H, W], and the tensor code that takes every window's (i, j) element at once (a
// "tap": one strided view of the padded input per position of the window). A convolution
// stacks the taps and multiplies (im2col); a max pool takes their maximum, an average pool their
// sum; each gradient scatters back through the same views. Being ordinary tensor code, it runs
// eagerly, is traced into decompositions and derivatives, and generates fused copies.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/attrs.h"
#include "ops/registry.h"
#include "zc/tensor.h"

namespace zc::ops {

struct Window2d {
  int64_t kh = 1, kw = 1;  // window size
  int64_t sh = 1, sw = 1;  // strides
  int64_t pt = 0, pl = 0;  // padding before (top, left)
  int64_t pb = 0, pr = 0;  // padding after (bottom, right)
  int64_t dh = 1, dw = 1;  // dilations
  bool ceil_mode = false;  // round the output size up
  int64_t out_h(int64_t h) const;
  int64_t out_w(int64_t w) const;
};

Window2d conv_window(const Conv2dAttrs& a, int64_t kh, int64_t kw);
Window2d pool_window(const Pool2dAttrs& a);

// The metadata of a channels-last [N, H, W, C] value as [N, C, H, W], and back: the shape
// rules of the channels-last ops (conv2d_nhwc, a channels-last max pool) are their [N, C, H, W]
// ops' between these. Other ranks are left as they are (the op's own rule refuses them).
TensorMeta nhwc_as_nchw(TensorMeta m);
TensorMeta nchw_as_nhwc(TensorMeta m);

// The output size along one dim of length n, or a value below 1 when no window fits.
int64_t window_out(int64_t n, int64_t k, int64_t s, int64_t before, int64_t after, int64_t d,
                   bool ceil_mode);

// Raises zc::Error (naming `op`) unless `in` is [N, C, H, W] with every window size, stride and
// dilation positive, padding non-negative, and at least one output position per dim.
void check_window(std::string_view op, const Shape& in, const Window2d& w);

// x [N, C, H, W] padded with `value` to what the windows read: the padding of `w`, plus, in
// ceil mode, what the last window reaches past it.
Tensor pad_for_windows(const Tensor& x, const Window2d& w, double value);

// The taps of x's windows, in row-major order of (i, j): each [N, C, OH, OW], a view of
// `padded` (pad_for_windows of x).
std::vector<Tensor> window_taps(const Tensor& padded, const Window2d& w, int64_t oh, int64_t ow);

// The gradient of x [.., H, W] from the gradients of its padded form's taps: each scattered
// back to its view's positions, summed, and the padding cut off.
Tensor taps_backward(const std::vector<Tensor>& tap_grads, const Window2d& w, int64_t h,
                     int64_t width);

}  // namespace zc::ops
