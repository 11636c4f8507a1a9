// oneDNN's kernels for convolutional networks on the CPU, and max pooling between them.
//
// Convolutions over channels-last tensors through oneDNN's direct kernels (its brgemm
// convolutions on AVX-512 machines, its JIT ones elsewhere): on a ResNet-50 they take 0.57x
// the time of the same convolutions as columns and a library product (docs/codegen.md has the
// figures). They want the input and output channels-last ([N, H, W, C]) and the weight in a
// blocked layout of their own; the lowering stage's channels_last pass arranges the first,
// and an OnednnConv keeps the second across calls, converted once per weight.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "ops/attrs.h"
#include "ops/weight_identity.h"
#include "zc/tensor.h"

namespace zc::ops {

// Whether this build has oneDNN's convolutions for f32 (ZC_CPU_CONV=columns turns them off:
// convolutions then decompose into columns and a product, as on a build without oneDNN).
bool onednn_conv_available();

// One convolution of a compiled graph (one node): its primitives, made once per input shape,
// and its weights in the primitive's layout, kept per weight (a repeated block's executable
// serves every instance of the block, each with weights of its own) while the weight's
// identity stays the same. Safe to run from many threads at once.
class OnednnConv {
 public:
  explicit OnednnConv(const Conv2dAttrs& attrs);
  ~OnednnConv();
  OnednnConv(const OnednnConv&) = delete;
  OnednnConv& operator=(const OnednnConv&) = delete;

  // x [N, H, W, C] f32 (any strides), w [C_out, C / groups, kh, kw] f32 (any strides), bias
  // [C_out] f32 or null, out [N, OH, OW, C_out] f32 contiguous (the conv2d_nhwc op's shapes);
  // the attributes' epilogue with `residual` (out's shape, f32) when they ask for one. The
  // epilogue runs in the kernel as oneDNN post-ops: the residual copied into out first (a
  // parallel reorder), then summed into it (a binary post-op would take oneDNN off its brgemm
  // kernels), then ReLU.
  void run(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
           const Tensor& out, WeightIdentity weight) const;

  // How many times a weight was converted into the primitive's layout (a test's count).
  int64_t conversions() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether max_pool2d of x with `attrs` runs on oneDNN's pooling kernel: an f32 [N, C, H, W] or
// channels-last input, no dilation, and windows that oneDNN's padding can describe.
bool onednn_max_pool_applies(const Tensor& x, const Pool2dAttrs& attrs);
// max_pool2d into `out` (contiguous, the op's output shape): the eager kernel, and what a
// compiled graph on the CPU runs for the op. Only where onednn_max_pool_applies.
void onednn_max_pool(const Tensor& x, const Tensor& out, const Pool2dAttrs& attrs);

// conv2d_nhwc's eager kernel on f32: an OnednnConv used once.
void onednn_conv_once(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      const Tensor& out, const Conv2dAttrs& attrs);

}  // namespace zc::ops
