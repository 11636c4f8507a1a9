// conv2d: a convolution over [N, C, H, W] as a matrix product over the windows' columns
// (im2col), the way ONNX Runtime's MLAS and Caffe compute NCHW convolutions: the taps of the
// padded input stacked into [N, C*kh*kw, OH*OW], multiplied by the weight [C_out, C*kh*kw]
// (per group), plus the bias. As a decomposition this lowers to a copy kernel, a library
// product and a pointwise epilogue, so what follows a convolution (bias, a folded batch norm, a
// residual add, a ReLU) fuses into the product's epilogue; a 1x1 convolution with stride 1 is
// the product alone. The eager kernel runs the same tensor code.
#include <vector>

#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "ops/eager.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "ops/window.h"
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

// [N, C*kh*kw, OH*OW]: row (c, i, j) holds window element (i, j) of channel c at every output
// position, matching the weight's [C_out, C, kh, kw] layout.
Tensor columns(const Tensor& x, const ConvDims& d) {
  if (d.pointwise()) return x.reshape({d.n, d.c, d.h * d.w});
  std::vector<Tensor> taps = window_taps(pad_for_windows(x, d.win, 0.0), d.win, d.oh, d.ow);
  return stack(taps, 2).reshape({d.n, d.c * d.kh * d.kw, d.l()});
}

std::vector<TensorMeta> conv2d_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dAttrs>(attrs);
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

std::vector<Tensor> conv2d_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dAttrs>(attrs);
  const DType out = output_dtype(OpId::conv2d, in, attrs), ct = compute_dtype(out);
  const Tensor x = to_dtype(in[0], ct), w = to_dtype(in[1], ct);
  const ConvDims d = dims_of(x.shape(), w.shape(), a);
  const Tensor cols = columns(x, d);
  Tensor y;
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

std::vector<Tensor> conv2d_eager(std::span<const Tensor> in, const Attrs& attrs,
                                 std::span<const TensorMeta>) {
  // The decomposition on concrete tensors; the op records its own derivative.
  NoGradGuard no_grad;
  return conv2d_decompose(in, attrs);
}

// The gradients of the product above: the bias's sums g over all but C_out; the weight's is g
// times the columns (recomputed from x) transposed; the columns' is the weight transposed
// times g, scattered back through the taps (col2im).
std::vector<Tensor> conv2d_vjp(const VjpArgs& args) {
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

}  // namespace

void define_conv_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::conv2d,
                 .min_inputs = 2,
                 .max_inputs = 3,
                 .attrs_index = attrs_index_of<Conv2dAttrs>(),
                 .infer = conv2d_infer,
                 .eager = conv2d_eager,
                 .decompose = conv2d_decompose,
                 .derivative = conv2d_vjp});
}

}  // namespace zc::ops
