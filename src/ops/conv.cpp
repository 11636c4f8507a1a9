// conv2d: a convolution over [N, C, H, W] as a matrix product over the windows' columns
// (im2col), the way ONNX Runtime's MLAS and Caffe compute NCHW convolutions: the taps of the
// padded input stacked into [N, C*kh*kw, OH*OW], multiplied by the weight [C_out, C*kh*kw]
// (per group), plus the bias. As a decomposition this lowers to a copy kernel, a library
// product and a pointwise epilogue, so what follows a convolution (bias, a folded batch norm, a
// residual add, a ReLU) fuses into the product's epilogue; a 1x1 convolution with stride 1 is
// the product alone. The eager kernel runs the same tensor code.
#include <algorithm>
#include <vector>

#include "cpu/onednn_conv.h"
#include "cpu/threads.h"
#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "ops/eager.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "ops/window.h"
#include "tensor/assign.h"
#include "zc/autograd.h"

namespace zc::ops {

namespace {

struct ConvDims {
  int64_t n, c, h, w, cout, kh, kw, groups, oh, ow;
  Window2d win;
  int64_t k() const { return c / groups * kh * kw; }  // a group's column length
  int64_t l() const { return oh * ow; }               // output positions
  bool pointwise() const {  // 1x1, stride 1, no padding: the input is the column matrix
    return kh == 1 && kw == 1 && win.sh == 1 && win.sw == 1 && win.pt == 0 && win.pl == 0 &&
           win.pb == 0 && win.pr == 0;
  }
};

ConvDims dims_of(const Shape& x, const Shape& w, const Conv2dAttrs& a) {
  ConvDims d{x[0], x[1], x[2], x[3], w[0], w[2], w[3], a.groups, 0, 0, conv_window(a, w[2], w[3])};
  d.oh = d.win.out_h(d.h);
  d.ow = d.win.out_w(d.w);
  return d;
}

Pool2dAttrs window_attrs(const Window2d& w) {
  return Pool2dAttrs{w.kh, w.kw, w.sh, w.sw, w.pt, w.pl, w.pb, w.pr, w.dh, w.dw, false, true};
}

// [N, C*kh*kw, OH*OW]: row (c, i, j) holds window element (i, j) of channel c at every output
// position, matching the weight's [C_out, C, kh, kw] layout (the im2col op).
Tensor columns(const Tensor& x, const ConvDims& d) {
  if (d.pointwise()) return x.reshape({d.n, d.c, d.h * d.w});
  return call1(OpId::im2col, {x}, window_attrs(d.win));
}

// ---- im2col: the columns, as an op of its own. The CPU backend keeps it whole and runs the
// kernel below, one pass that reads the input where a window lies in it and writes zeros where
// it lies in the padding; elsewhere (CUDA, the interpreter) it decomposes into the taps of the
// padded input, stacked.

std::vector<TensorMeta> im2col_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const Window2d w = pool_window(std::get<Pool2dAttrs>(attrs));
  const TensorMeta& x = in[0];
  if (!is_floating(x.dtype)) op_error("im2col", "expected a floating input, got " + meta_str(x));
  if (std::get<Pool2dAttrs>(attrs).channels_last) op_error("im2col", "expected [N, C, H, W]");
  check_window("im2col", x.shape, w);
  return {
      TensorMeta{{x.shape[0], x.shape[1] * w.kh * w.kw, w.out_h(x.shape[2]) * w.out_w(x.shape[3])},
                 x.dtype,
                 x.device}};
}

std::vector<Tensor> im2col_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const Window2d w = pool_window(std::get<Pool2dAttrs>(attrs));
  const Tensor& x = in[0];
  const int64_t oh = w.out_h(x.size(2)), ow = w.out_w(x.size(3));
  if (w.sh == w.kh && w.sw == w.kw && w.dh == 1 && w.dw == 1) {
    // Windows that tile the input (a ViT's or ConvNeXt's patches): each column is a block of
    // it, so the columns are the blocks reordered, one copy. As kh*kw taps stacked, a ViT's
    // 16x16 patches made one concat of 256 loops, 0.9 s of NVRTC for a 1 ms model.
    const Tensor p = pad_for_windows(x, w, 0.0).slice(2, 0, oh * w.kh).slice(3, 0, ow * w.kw);
    return {p.reshape({x.size(0), x.size(1), oh, w.kh, ow, w.kw})
                .permute({0, 1, 3, 5, 2, 4})
                .reshape({x.size(0), x.size(1) * w.kh * w.kw, oh * ow})};
  }
  std::vector<Tensor> taps = window_taps(pad_for_windows(x, w, 0.0), w, oh, ow);
  return {stack(taps, 2).reshape({x.size(0), x.size(1) * w.kh * w.kw, oh * ow})};
}

template <class T>
void im2col_rows(const Tensor& x, const Window2d& w, T* out) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t oh = w.out_h(h), ow = w.out_w(wd), rows = c * w.kh * w.kw;
  const T* src = x.data<T>();
  // Rows (n, c, i, j) are independent: shared out among the threads.
  cpu::parallel_for_if(n * rows * oh * ow > 65536, n * rows, [&](int64_t r) {
    const int64_t b = r / rows, row = r % rows;
    const int64_t ch = row / (w.kh * w.kw), i = row / w.kw % w.kh, j = row % w.kw;
    const T* plane = src + (b * c + ch) * h * wd;
    T* dst = out + r * oh * ow;
    // The output columns whose input column lies inside the row: [lo, hi).
    const int64_t off = j * w.dw - w.pl;
    int64_t lo = off >= 0 ? 0 : (-off + w.sw - 1) / w.sw;
    int64_t hi = wd - off <= 0 ? 0 : (wd - off + w.sw - 1) / w.sw;
    lo = std::min(lo, ow);
    hi = std::clamp(hi, lo, ow);
    for (int64_t y = 0; y < oh; ++y) {
      const int64_t iy = y * w.sh - w.pt + i * w.dh;
      T* line = dst + y * ow;
      if (iy < 0 || iy >= h) {
        std::fill(line, line + ow, T(0));
        continue;
      }
      const T* in_row = plane + iy * wd + off;
      std::fill(line, line + lo, T(0));
      if (w.sw == 1) {
        std::copy(in_row + lo, in_row + hi, line + lo);
      } else {
        for (int64_t k = lo; k < hi; ++k) line[k] = in_row[k * w.sw];
      }
      std::fill(line + hi, line + ow, T(0));
    }
  });
}

void im2col_into(std::span<const Tensor> in, const Attrs& attrs, std::span<const Tensor> out) {
  const Window2d w = pool_window(std::get<Pool2dAttrs>(attrs));
  const DType ct = compute_dtype(in[0].dtype());
  const Tensor x = eager_contiguous(as_dtype(in[0], ct));
  if (out[0].dtype() == ct) {
    visit_float_compute(ct, [&](auto tag) {
      using T = decltype(tag);
      im2col_rows<T>(x, w, out[0].data<T>());
    });
    return;
  }
  // 16-bit floats: the columns in f32, then converted into place.
  Tensor cols = Tensor::empty(out[0].shape(), ct);
  im2col_rows<float>(x, w, cols.data<float>());
  assign_values(out[0], as_dtype(cols, out[0].dtype()));
}

std::vector<Tensor> im2col_eager(std::span<const Tensor> in, const Attrs& attrs,
                                 std::span<const TensorMeta> outs) {
  Tensor out = Tensor::empty(outs[0].shape, outs[0].dtype);
  im2col_into(in, attrs, {&out, 1});
  return {out};
}

// The columns' gradient scattered back through the taps (col2im).
std::vector<Tensor> im2col_vjp(const VjpArgs& args) {
  const Window2d w = pool_window(std::get<Pool2dAttrs>(args.attrs));
  const Tensor& x = args.inputs[0];
  const int64_t oh = w.out_h(x.size(2)), ow = w.out_w(x.size(3));
  const Tensor taps = out_grad(args).reshape({x.size(0), x.size(1), w.kh * w.kw, oh, ow});
  std::vector<Tensor> grads;
  for (int64_t t = 0; t < w.kh * w.kw; ++t) grads.push_back(taps.slice(2, t, t + 1).squeeze(2));
  return {taps_backward(grads, w, x.size(2), x.size(3))};
}

// ---- conv2d, optionally with a fused epilogue (Conv2dAttrs::residual, relu, relu6: a last
// input of the output's shape added, then a ReLU or a ReLU6). Only the conv passes set the epilogue
// (lower/channels_last.h), for a backend whose convolution computes it on the way out (cuDNN);
// it is the product's epilogue as it would be computed after the op, which is also how it
// decomposes and differentiates. Inputs: x, w, an optional bias, the residual when the
// attributes say so.

// The attributes and inputs of the convolution alone (no epilogue).
Conv2dAttrs plain(Conv2dAttrs a) {
  a.residual = a.relu = a.relu6 = false;
  return a;
}

template <class T>
std::span<const T> conv_inputs(std::span<const T> in, const Conv2dAttrs& a) {
  return in.first(in.size() - (a.residual ? 1 : 0));
}

// The epilogue on the convolution's result y (in its layout; `residual` of y's shape).
Tensor with_epilogue(Tensor y, const Conv2dAttrs& a, const Tensor* residual) {
  if (a.residual) y = y + *residual;
  if (a.relu) y = relu(y);
  if (a.relu6) y = clamp(y, 0.0, 6.0);
  return y;
}

// The epilogue's gradient: ReLU's mask on the output's gradient (`out` is the op's output).
Tensor epilogue_grad(Tensor g, const Conv2dAttrs& a, const Tensor& out) {
  if (a.relu) g = g * to_dtype(gt(out, 0.0), g.dtype());
  // torch's ReLU6 (hardtanh) rule: the gradient passes where 0 < y < 6.
  if (a.relu6) g = g * to_dtype(gt(out, 0.0), g.dtype()) * to_dtype(lt(out, 6.0), g.dtype());
  return g;
}

// The epilogue's inputs against the op's output: a residual's count and shape.
void check_epilogue(const char* op, std::span<const TensorMeta> in, const Conv2dAttrs& a,
                    const TensorMeta& out) {
  if (a.relu && a.relu6) op_error(op, "expected at most one of relu and relu6 in the epilogue");
  if (a.residual && (in.back().shape != out.shape || in.back().dtype != out.dtype)) {
    op_error(op, "expected a residual " + meta_str(out) + ", got " + meta_str(in.back()));
  }
}

// The convolution's own shape rule (inputs x, w, an optional bias).
std::vector<TensorMeta> plain_conv2d_infer(std::span<const TensorMeta> in, const Conv2dAttrs& a) {
  const TensorMeta &x = in[0], &w = in[1];
  if (x.shape.size() != 4 || w.shape.size() != 4) {
    op_error("conv2d",
             "expected an input [N, C, H, W] and a weight [C_out, C / groups, kh, kw], "
             "got " +
                 metas_str(in));
  }
  const DType dt = result_dtype(in);
  if (!is_floating(dt)) op_error("conv2d", "expected floating tensors, got " + metas_str(in));
  const int64_t c = x.shape[1], cout = w.shape[0];
  if (a.groups < 1 || c % a.groups != 0 || cout % a.groups != 0 || w.shape[1] * a.groups != c) {
    op_error("conv2d", "input " + meta_str(x) + ", weight " + meta_str(w) + ", groups " +
                           std::to_string(a.groups) +
                           ": expected groups to divide C and C_out and the weight's dim 1 to "
                           "be C / groups");
  }
  if (in.size() > 2 && in[2].shape != Shape{cout}) {
    op_error("conv2d", "expected a bias [" + std::to_string(cout) + "], got " + meta_str(in[2]));
  }
  check_window("conv2d", x.shape, conv_window(a, w.shape[2], w.shape[3]));
  const ConvDims d = dims_of(x.shape, w.shape, a);
  return {TensorMeta{{d.n, cout, d.oh, d.ow}, dt, x.device}};
}

std::vector<TensorMeta> conv2d_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dAttrs>(attrs);
  if ((a.residual && in.size() < 3) || (!a.residual && in.size() > 3)) {
    op_error("conv2d", std::string("expected an input [N, C, H, W], a weight") +
                           (a.residual ? ", an optional bias and a residual" : ", a bias") +
                           ", got " + metas_str(in));
  }
  std::vector<TensorMeta> out = plain_conv2d_infer(conv_inputs(in, a), a);
  check_epilogue("conv2d", in, a, out[0]);
  return out;
}

// A depthwise convolution (one input channel per group) off the CPU: the sum over the window
// of each tap times its weights, which fuses into one pointwise kernel reading the padded
// input, instead of columns kh*kw times the input's size and a product of one row per channel
// (ConvNeXt's 7x7 convolutions on a GPU spent 2 of its 3.4 ms so). The CPU keeps the columns:
// its compiled graphs run convolutions through oneDNN, and its eager kernel is im2col's.
bool depthwise_as_taps(const ConvDims& d, const Device& device) {
  return d.groups > 1 && d.c == d.groups && !device.is_cpu();
}

// y [N, C_out, OH, OW] = the sum over taps (i, j) of tap(i, j) times w[:, 0, i, j], computed
// as [N, C, m, OH, OW] (m = C_out / C outputs per input channel) so that the taps broadcast.
Tensor depthwise_taps(const Tensor& x, const Tensor& w, const ConvDims& d) {
  const int64_t m = d.cout / d.c;
  const std::vector<Tensor> taps = window_taps(pad_for_windows(x, d.win, 0.0), d.win, d.oh, d.ow);
  const Tensor wt = w.reshape({d.c, m, d.kh * d.kw});
  Tensor y;
  for (int64_t t = 0; t < d.kh * d.kw; ++t) {
    const Tensor term = taps[static_cast<size_t>(t)].unsqueeze(2) *
                        wt.slice(2, t, t + 1).reshape({1, d.c, m, 1, 1});
    y = y.defined() ? y + term : term;
  }
  return y.reshape({d.n, d.cout, d.oh, d.ow});
}

// The convolution alone (inputs x, w, an optional bias).
std::vector<Tensor> plain_conv2d_decompose(std::span<const Tensor> in, const Conv2dAttrs& a) {
  const DType out = output_dtype(OpId::conv2d, in, a), ct = compute_dtype(out);
  const Tensor x = to_dtype(in[0], ct), w = to_dtype(in[1], ct);
  const ConvDims d = dims_of(x.shape(), w.shape(), a);
  Tensor y;
  if (depthwise_as_taps(d, x.device())) {
    y = depthwise_taps(x, w, d);
    if (in.size() > 2) y = y + to_dtype(in[2], ct).reshape({1, d.cout, 1, 1});
    return {to_dtype(y, out)};
  }
  const Tensor cols = columns(x, d);
  if (d.groups == 1) {
    y = matmul(w.reshape({d.cout, d.k()}), cols);  // [N, C_out, L]
  } else {
    y = matmul(w.reshape({d.groups, d.cout / d.groups, d.k()}),
               cols.reshape({d.n, d.groups, d.k(), d.l()}));  // [N, G, C_out / G, L]
  }
  y = y.reshape({d.n, d.cout, d.oh, d.ow});
  if (in.size() > 2) y = y + to_dtype(in[2], ct).reshape({1, d.cout, 1, 1});
  return {to_dtype(y, out)};
}

std::vector<Tensor> conv2d_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dAttrs>(attrs);
  if (!a.residual && !a.relu && !a.relu6) return plain_conv2d_decompose(in, a);
  Tensor y = plain_conv2d_decompose(conv_inputs(in, a), plain(a))[0];
  return {with_epilogue(y, a, a.residual ? &in.back() : nullptr)};
}

std::vector<Tensor> conv2d_eager(std::span<const Tensor> in, const Attrs& attrs,
                                 std::span<const TensorMeta>) {
  // The decomposition on concrete tensors; the op records its own derivative.
  NoGradGuard no_grad;
  return conv2d_decompose(in, attrs);
}

// The gradients of the product above: the bias's sums g over all but C_out; the weight's is g
// times the columns (recomputed from x) transposed; the columns' is the weight transposed
// times g, scattered back through the taps (col2im).
std::vector<Tensor> plain_conv2d_vjp(const VjpArgs& args) {
  const auto& a = std::get<Conv2dAttrs>(args.attrs);
  const DType ct = compute_dtype(args.outputs[0].dtype());
  const Tensor x = to_dtype(args.inputs[0], ct), w = to_dtype(args.inputs[1], ct);
  const Tensor g = to_dtype(out_grad(args), ct);
  const ConvDims d = dims_of(x.shape(), w.shape(), a);
  const int64_t per = d.cout / d.groups;
  std::vector<Tensor> out(args.inputs.size());
  if (args.inputs.size() > 2 && args.wants(2)) out[2] = sum(g, {0, 2, 3});
  if (args.wants(1)) {
    const Tensor cols = columns(x, d);
    Tensor dw;
    if (d.groups == 1) {
      dw = sum(matmul(g.reshape({d.n, d.cout, d.l()}), cols.transpose(1, 2)), {0});
    } else {
      dw = sum(matmul(g.reshape({d.n, d.groups, per, d.l()}),
                      cols.reshape({d.n, d.groups, d.k(), d.l()}).transpose(2, 3)),
               {0});
    }
    out[1] = dw.reshape(w.shape());
  }
  if (args.wants(0)) {
    Tensor dcols;
    if (d.groups == 1) {
      dcols = matmul(w.reshape({d.cout, d.k()}).transpose(0, 1), g.reshape({d.n, d.cout, d.l()}));
    } else {
      dcols = matmul(w.reshape({d.groups, per, d.k()}).transpose(1, 2),
                     g.reshape({d.n, d.groups, per, d.l()}));
    }
    if (d.pointwise()) {
      out[0] = dcols.reshape({d.n, d.c, d.h, d.w});
    } else {
      const Tensor taps = dcols.reshape({d.n, d.c, d.kh * d.kw, d.oh, d.ow});
      std::vector<Tensor> grads;
      for (int64_t t = 0; t < d.kh * d.kw; ++t) grads.push_back(taps.slice(2, t, t + 1).squeeze(2));
      out[0] = taps_backward(grads, d.win, d.h, d.w);
    }
  }
  return out;
}

// The epilogue's gradient first (ReLU's mask; the residual's is what reaches the sum), then
// the convolution's. The output the convolution's rule would read is not saved (the epilogue
// changed it); that rule does not read it.
std::vector<Tensor> conv2d_vjp(const VjpArgs& args) {
  const auto& a = std::get<Conv2dAttrs>(args.attrs);
  if (!a.residual && !a.relu && !a.relu6) return plain_conv2d_vjp(args);
  const Tensor g = epilogue_grad(out_grad(args), a, args.outputs[0]);
  std::span<const Tensor> conv = conv_inputs(args.inputs, a);
  const std::vector<Tensor> grads{g};
  const Attrs plain_attrs = plain(a);
  std::vector<Tensor> r =
      plain_conv2d_vjp(VjpArgs{conv, args.outputs, plain_attrs, grads, args.wanted});
  r.push_back(args.wants(args.inputs.size() - 1) ? g : Tensor());
  return r;
}

// ---- conv2d_nhwc: conv2d over channels-last tensors, input [N, H, W, C] and output
// [N, OH, OW, C_out] (the weight as conv2d's), then conv2d's epilogue. Only the channels_last
// pass makes it, for a backend with a kernel of that layout; it is conv2d between two permutes
// and the epilogue, which is also its decomposition and its derivative.

std::vector<TensorMeta> conv2d_nhwc_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dAttrs>(attrs);
  if (in[0].shape.size() != 4 || (a.residual && in.size() < 3) || (!a.residual && in.size() > 3)) {
    op_error("conv2d_nhwc", std::string("expected an input [N, H, W, C], a weight") +
                                (a.residual ? ", an optional bias and a residual" : "") + ", got " +
                                metas_str(in));
  }
  std::span<const TensorMeta> conv = conv_inputs(in, a);
  std::vector<TensorMeta> nchw(conv.begin(), conv.end());
  nchw[0] = nhwc_as_nchw(nchw[0]);
  TensorMeta out = nchw_as_nhwc(plain_conv2d_infer(nchw, a)[0]);
  check_epilogue("conv2d_nhwc", in, a, out);
  return {out};
}

std::vector<Tensor> conv2d_nhwc_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dAttrs>(attrs);
  std::span<const Tensor> conv = conv_inputs(in, a);
  std::vector<Tensor> nchw(conv.begin(), conv.end());
  nchw[0] = in[0].permute({0, 3, 1, 2});
  Tensor y = call1(OpId::conv2d, nchw, plain(a)).permute({0, 2, 3, 1});
  return {with_epilogue(y, a, a.residual ? &in.back() : nullptr)};
}

std::vector<Tensor> conv2d_nhwc_eager(std::span<const Tensor> in, const Attrs& attrs,
                                      std::span<const TensorMeta> outs) {
  const bool f32 =
      std::all_of(in.begin(), in.end(), [](const Tensor& t) { return t.dtype() == DType::f32; });
  if (!cpu::onednn_conv_available() || !f32) {
    NoGradGuard no_grad;
    return conv2d_nhwc_decompose(in, attrs);
  }
  const auto& a = std::get<Conv2dAttrs>(attrs);
  Tensor out = Tensor::empty(outs[0].shape, outs[0].dtype);
  const size_t convs = conv_inputs(in, a).size();
  cpu::onednn_conv_once(in[0], in[1], convs > 2 ? &in[2] : nullptr,
                        a.residual ? &in.back() : nullptr, out, a);
  return {out};
}

// As conv2d's, through the permutes.
std::vector<Tensor> conv2d_nhwc_vjp(const VjpArgs& args) {
  const auto& a = std::get<Conv2dAttrs>(args.attrs);
  const Tensor g = epilogue_grad(out_grad(args), a, args.outputs[0]);
  std::span<const Tensor> conv = conv_inputs(args.inputs, a);
  std::vector<Tensor> in(conv.begin(), conv.end());
  in[0] = in[0].permute({0, 3, 1, 2});
  const std::vector<Tensor> out{args.outputs[0].permute({0, 3, 1, 2})};
  const std::vector<Tensor> grads{g.permute({0, 3, 1, 2})};
  const Attrs plain_attrs = plain(a);
  std::vector<Tensor> r = plain_conv2d_vjp(VjpArgs{in, out, plain_attrs, grads, args.wanted});
  if (r[0].defined()) r[0] = r[0].permute({0, 2, 3, 1});
  if (a.residual) r.push_back(args.wants(args.inputs.size() - 1) ? g : Tensor());
  return r;
}

}  // namespace

void define_conv_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::im2col,
                 .min_inputs = 1,
                 .max_inputs = 1,
                 .attrs_index = attrs_index_of<Pool2dAttrs>(),
                 .infer = im2col_infer,
                 .eager = im2col_eager,
                 .eager_into = im2col_into,
                 .decompose = im2col_decompose,
                 .derivative = im2col_vjp});
  t.define(OpDef{.id = OpId::conv2d,
                 .min_inputs = 2,
                 .max_inputs = 4,
                 .attrs_index = attrs_index_of<Conv2dAttrs>(),
                 .infer = conv2d_infer,
                 .eager = conv2d_eager,
                 .decompose = conv2d_decompose,
                 .derivative = conv2d_vjp});
  t.define(OpDef{.id = OpId::conv2d_nhwc,
                 .min_inputs = 2,
                 .max_inputs = 4,
                 .attrs_index = attrs_index_of<Conv2dAttrs>(),
                 .infer = conv2d_nhwc_infer,
                 .eager = conv2d_nhwc_eager,
                 .decompose = conv2d_nhwc_decompose,
                 .derivative = conv2d_nhwc_vjp});
}

}  // namespace zc::ops
