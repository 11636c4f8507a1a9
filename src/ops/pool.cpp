// max_pool2d and avg_pool2d over [N, C, H, W]: the windows' taps (ops/window.h) combined
// elementwise, a maximum or a sum, so a pool lowers to one fused pointwise kernel over strided
// reads of its input (and of a padded copy when it pads). The eager kernels run the same code,
// but for an f32 max pool where oneDNN is built in: its pooling kernel, which the CPU backend
// also runs in compiled graphs (a ResNet stem's pool compiled in 195 ms as generated code).
#include <algorithm>
#include <limits>
#include <vector>

#include "cpu/onednn_conv.h"
#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "ops/eager.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "ops/window.h"
#include "tensor/assign.h"
#include "zc/autograd.h"
#include "zc/factories.h"

namespace zc::ops {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<TensorMeta> pool_infer(std::string_view op, std::span<const TensorMeta> in,
                                   const Attrs& attrs) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  const TensorMeta& x = in[0];
  if (!is_floating(x.dtype)) op_error(op, "expected a floating input, got " + meta_str(x));
  const Window2d w = pool_window(a);
  check_window(op, x.shape, w);
  // Torch's rule, which ONNX exporters follow: a window never lies wholly in padding.
  if (2 * std::max(w.pt, w.pb) > w.dh * (w.kh - 1) + 1 ||
      2 * std::max(w.pl, w.pr) > w.dw * (w.kw - 1) + 1) {
    op_error(op, "padding " + attrs_str(attrs) +
                     " exceeds half the (dilated) window; expected padding <= window / 2");
  }
  return {TensorMeta{
      {x.shape[0], x.shape[1], w.out_h(x.shape[2]), w.out_w(x.shape[3])}, x.dtype, x.device}};
}

// A result that shares an input's storage (a 1x1 pool without padding is its input) becomes
// a copy: an op's output is a tensor of its own.
std::vector<Tensor> own_storage(std::vector<Tensor> out, std::span<const Tensor> in) {
  for (Tensor& t : out) {
    for (const Tensor& i : in) {
      if (t.impl_ptr()->storage == i.impl_ptr()->storage) t = eager_cast(t, t.dtype());
    }
  }
  return out;
}

// ---- max_pool2d

// With Pool2dAttrs::channels_last the op is the one below between permutes of its input and
// its result ([N, H, W, C] to [N, C, H, W] and back): its shape rule, decomposition and
// derivative are those.
Pool2dAttrs nchw(Pool2dAttrs a) {
  a.channels_last = false;
  return a;
}

std::vector<TensorMeta> max_pool_nchw_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  return pool_infer("max_pool2d", in, attrs);
}

std::vector<TensorMeta> max_pool_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  if (!a.channels_last) return max_pool_nchw_infer(in, attrs);
  const TensorMeta x = nhwc_as_nchw(in[0]);
  return {nchw_as_nhwc(max_pool_nchw_infer({&x, 1}, nchw(a))[0])};
}

std::vector<Tensor> max_pool_nchw_decompose(std::span<const Tensor> in, const Attrs& attrs);

std::vector<Tensor> max_pool_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  if (!a.channels_last) return max_pool_nchw_decompose(in, attrs);
  const Tensor x = in[0].permute({0, 3, 1, 2});
  return {max_pool_nchw_decompose({&x, 1}, nchw(a))[0].permute({0, 2, 3, 1})};
}

std::vector<Tensor> max_pool_nchw_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const Window2d w = pool_window(std::get<Pool2dAttrs>(attrs));
  const Tensor& x = in[0];
  const int64_t oh = w.out_h(x.shape()[2]), ow = w.out_w(x.shape()[3]);
  std::vector<Tensor> taps = window_taps(pad_for_windows(x, w, -kInf), w, oh, ow);
  Tensor y = taps[0];
  for (size_t i = 1; i < taps.size(); ++i) y = maximum(y, taps[i]);
  return {y};
}

std::vector<Tensor> max_pool_eager(std::span<const Tensor> in, const Attrs& attrs,
                                   std::span<const TensorMeta> outs) {
  if (cpu::onednn_max_pool_applies(in[0], std::get<Pool2dAttrs>(attrs))) {
    Tensor out = Tensor::empty(outs[0].shape, outs[0].dtype);
    cpu::onednn_max_pool(in[0], out, std::get<Pool2dAttrs>(attrs));
    return {out};
  }
  NoGradGuard no_grad;
  return own_storage(max_pool_decompose(in, attrs), in);
}

// Into a compiled graph's buffer (the CPU backend keeps max_pool2d whole where oneDNN is in).
void max_pool_into(std::span<const Tensor> in, const Attrs& attrs, std::span<const Tensor> out) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  if (cpu::onednn_max_pool_applies(in[0], a)) return cpu::onednn_max_pool(in[0], out[0], a);
  NoGradGuard no_grad;
  assign_values(out[0], eager_contiguous(max_pool_decompose(in, attrs)[0]));
}

std::vector<Tensor> max_pool_nchw_vjp(const VjpArgs& args);

std::vector<Tensor> max_pool_vjp(const VjpArgs& args) {
  const auto& a = std::get<Pool2dAttrs>(args.attrs);
  if (!a.channels_last) return max_pool_nchw_vjp(args);
  const std::vector<Tensor> in{args.inputs[0].permute({0, 3, 1, 2})};
  const std::vector<Tensor> out{args.outputs[0].permute({0, 3, 1, 2})};
  const std::vector<Tensor> grads{out_grad(args).permute({0, 3, 1, 2})};
  const Attrs plain = nchw(a);
  return {max_pool_nchw_vjp(VjpArgs{in, out, plain, grads, args.wanted})[0].permute({0, 2, 3, 1})};
}

// The gradient goes to the first element of each window (row-major) that equals the maximum,
// as torch's kernels choose it.
std::vector<Tensor> max_pool_nchw_vjp(const VjpArgs& args) {
  const Window2d w = pool_window(std::get<Pool2dAttrs>(args.attrs));
  const Tensor& x = args.inputs[0];
  const Tensor& y = args.outputs[0];
  const Tensor g = out_grad(args);
  std::vector<Tensor> taps = window_taps(pad_for_windows(x, w, -kInf), w, y.size(2), y.size(3));
  Tensor taken;  // windows whose maximum has been found (1) or not (0)
  std::vector<Tensor> grads;
  for (const Tensor& t : taps) {
    Tensor hit = cast(eq(t, y), g.dtype());
    if (taken.defined()) hit = hit * (1.0 - taken);
    taken = taken.defined() ? taken + hit : hit;
    grads.push_back(g * hit);
  }
  return {taps_backward(grads, w, x.size(2), x.size(3))};
}

// ---- avg_pool2d

std::vector<TensorMeta> avg_pool_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  if (a.dilation_h != 1 || a.dilation_w != 1 || a.channels_last) {
    op_error("avg_pool2d",
             "dilation must be 1 and the layout [N, C, H, W], got " + attrs_str(attrs));
  }
  return pool_infer("avg_pool2d", in, attrs);
}

// Each output position's divisor: its window's size within the padded input (count_include_pad)
// or within the input, never counting what ceil mode reaches past the padding. A number when
// every window has the same one, else a constant [OH, OW].
Tensor avg_divisor(const Pool2dAttrs& a, int64_t h, int64_t width, DType dtype) {
  const Window2d w = pool_window(a);
  const int64_t oh = w.out_h(h), ow = w.out_w(width);
  auto sizes = [&](int64_t out, int64_t n, int64_t k, int64_t s, int64_t before, int64_t after) {
    std::vector<int64_t> v;
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * s - before;
      const int64_t end = std::min(start + k, n + after);
      v.push_back(a.count_include_pad ? end - start
                                      : std::min(end, n) - std::max<int64_t>(start, 0));
    }
    return v;
  };
  const std::vector<int64_t> rows = sizes(oh, h, w.kh, w.sh, w.pt, w.pb);
  const std::vector<int64_t> cols = sizes(ow, width, w.kw, w.sw, w.pl, w.pr);
  std::vector<float> div;
  bool uniform = true;
  for (int64_t r : rows) {
    for (int64_t c : cols) {
      div.push_back(static_cast<float>(r * c));
      uniform = uniform && div.back() == div.front();
    }
  }
  if (uniform) return full({}, div.front(), dtype);
  return from_vector(div, {oh, ow}).to(dtype);
}

std::vector<Tensor> avg_pool_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  const Window2d w = pool_window(a);
  const Tensor& x = in[0];
  const int64_t oh = w.out_h(x.shape()[2]), ow = w.out_w(x.shape()[3]);
  std::vector<Tensor> taps = window_taps(pad_for_windows(x, w, 0.0), w, oh, ow);
  Tensor y = taps[0];
  for (size_t i = 1; i < taps.size(); ++i) y = y + taps[i];
  Tensor div = avg_divisor(a, x.shape()[2], x.shape()[3], x.dtype());
  if (!x.is_traced() && !x.device().is_cpu()) div = div.to(x.device());
  return {y / div};
}

std::vector<Tensor> avg_pool_eager(std::span<const Tensor> in, const Attrs& attrs,
                                   std::span<const TensorMeta>) {
  NoGradGuard no_grad;
  return own_storage(avg_pool_decompose(in, attrs), in);
}

std::vector<Tensor> avg_pool_vjp(const VjpArgs& args) {
  const auto& a = std::get<Pool2dAttrs>(args.attrs);
  const Window2d w = pool_window(a);
  const Tensor& x = args.inputs[0];
  Tensor div = avg_divisor(a, x.size(2), x.size(3), args.outputs[0].dtype());
  if (!x.is_traced() && !x.device().is_cpu()) div = div.to(x.device());
  const Tensor g = out_grad(args) / div;
  std::vector<Tensor> grads(static_cast<size_t>(w.kh * w.kw), g);
  return {taps_backward(grads, w, x.size(2), x.size(3))};
}

}  // namespace

void define_pool_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::max_pool2d,
                 .min_inputs = 1,
                 .max_inputs = 1,
                 .attrs_index = attrs_index_of<Pool2dAttrs>(),
                 .infer = max_pool_infer,
                 .eager = max_pool_eager,
                 .eager_into = max_pool_into,
                 .decompose = max_pool_decompose,
                 .derivative = max_pool_vjp});
  t.define(OpDef{.id = OpId::avg_pool2d,
                 .min_inputs = 1,
                 .max_inputs = 1,
                 .attrs_index = attrs_index_of<Pool2dAttrs>(),
                 .infer = avg_pool_infer,
                 .eager = avg_pool_eager,
                 .decompose = avg_pool_decompose,
                 .derivative = avg_pool_vjp});
}

}  // namespace zc::ops
