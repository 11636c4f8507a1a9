#include "codegen/backends/cuda/library_conv.h"

#include "ops/window.h"
#include "util/check.h"
#include "zc/error.h"

namespace zc::codegen::cuda {

namespace {

std::array<int64_t, 4> four(const Shape& s) {
  ZC_CHECK(s.size() == 4, "a convolution operand of rank " << s.size());
  return {s[0], s[1], s[2], s[3]};
}

// Value v's buffer, offset and strides, checked to hold v's own dtype.
const ValueView& operand(const Schedule& s, ir::ValueId v, const char* what) {
  const ValueView& view = s.at(v).view;
  if (s.graph.meta(view.base).dtype != s.graph.meta(v).dtype) {
    throw Error(std::string("a CUDA convolution's ") + what + " is a converted view (" +
                std::string(dtype_name(s.graph.meta(view.base).dtype)) + " read as " +
                std::string(dtype_name(s.graph.meta(v).dtype)) +
                "), which cuDNN cannot read; leave ZC_CUDA_CONV unset");
  }
  return view;
}

}  // namespace

std::optional<LibraryConv> library_conv(const Schedule& s, const Kernel& k) {
  if (k.kind != KernelKind::extern_op) return std::nullopt;
  const ir::Node& n = s.graph.nodes[k.anchor];
  if (n.op != ops::OpId::conv2d) return std::nullopt;
  const auto& a = std::get<ops::Conv2dAttrs>(n.attrs);
  const size_t convs = n.inputs.size() - (a.residual ? 1 : 0);
  LibraryConv lc;
  zc::cuda::ConvProblem& p = lc.problem;
  p.dtype = s.graph.meta(n.outputs[0]).dtype;
  for (ir::ValueId v : n.inputs) {
    if (s.graph.meta(v).dtype != p.dtype) {
      throw Error("a CUDA convolution over mixed dtypes (" +
                  std::string(dtype_name(s.graph.meta(v).dtype)) + " and " +
                  std::string(dtype_name(p.dtype)) + "); leave ZC_CUDA_CONV unset");
    }
  }
  const ValueView& xv = operand(s, n.inputs[0], "input");
  const ValueView& wv = operand(s, n.inputs[1], "weight");
  const ValueView& yv = operand(s, n.outputs[0], "output");
  p.x = four(s.graph.meta(n.inputs[0]).shape);
  p.x_strides = four(xv.strides);
  p.w = four(s.graph.meta(n.inputs[1]).shape);
  p.y = four(s.graph.meta(n.outputs[0]).shape);
  p.w_strides = four(wv.strides);
  ZC_CHECK(four(yv.strides) ==
               (std::array<int64_t, 4>{p.y[1] * p.y[2] * p.y[3], p.y[2] * p.y[3], p.y[3], 1}),
           "a convolution's output is not dense");
  const ops::Window2d win = ops::conv_window(a, p.w[2], p.w[3]);
  p.pad_top = win.pt;
  p.pad_left = win.pl;
  p.pad_bottom = win.pb;
  p.pad_right = win.pr;
  p.stride_h = win.sh;
  p.stride_w = win.sw;
  p.dilation_h = win.dh;
  p.dilation_w = win.dw;
  p.groups = a.groups;
  lc.x = xv.base;
  lc.x_offset = xv.offset;
  lc.w = wv.base;
  lc.w_offset = wv.offset;
  lc.y = yv.base;
  lc.y_offset = yv.offset;
  if (convs > 2) {
    const ValueView& bv = operand(s, n.inputs[2], "bias");
    p.bias = true;
    p.bias_stride = bv.strides.at(0);
    lc.bias = bv.base;
    lc.bias_offset = bv.offset;
  }
  if (a.residual) {
    const ValueView& zv = operand(s, n.inputs.back(), "residual");
    p.residual = true;
    p.z_strides = four(zv.strides);
    lc.residual = zv.base;
    lc.residual_offset = zv.offset;
  }
  p.relu = a.relu;
  // The conv passes fuse a ReLU6 only into oneDNN's convolutions (lower/channels_last.cpp).
  ZC_CHECK(!a.relu6, << "a ReLU6 epilogue reached cuDNN's convolution");
  return lc;
}

}  // namespace zc::codegen::cuda
