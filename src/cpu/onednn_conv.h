// oneDNN's kernels for convolutional networks on the CPU, and max pooling between them.
//
// Convolutions over channels-last tensors through oneDNN's direct kernels (its brgemm
// convolutions on AVX-512 machines, its JIT ones elsewhere): on a ResNet-50 they take 0.57x
// the time of the same convolutions as columns and a library product (docs/codegen.md has the
// figures). They want the input and output channels-last ([N, H, W, C]) and the weight in a
// blocked layout of their own; the lowering stage's channels_last pass arranges the first,
// and an OnednnConv keeps the second across calls, converted once per weight.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "cpu/weight_identity.h"
#include "ops/attrs.h"
#include "zc/tensor.h"

namespace zc::cpu {

// Whether this build has oneDNN's convolutions for f32 (ZC_CPU_CONV=columns turns them off:
// convolutions then decompose into columns and a product, as on a build without oneDNN).
// Raises zc::Error for a ZC_CPU_CONV other than auto, direct, winograd or columns.
bool onednn_conv_available();

// Whether 3x3 stride-1 convolutions run as Winograd where oneDNN has a kernel for them (AVX-512
// CPUs): ZC_CPU_CONV=winograd or direct says; by default (auto) when the process's thread pool
// is at most kWinogradMaxThreads. Winograd does 2.25-4x fewer multiplications but moves more
// data (its weights are 16/9 or 36/9 the size, and the blocked input and output are converted
// to and from channels-last around it), so it pays where each thread has much work:
// ResNet-50's 3x3 convolutions on 2 threads took 0.35-0.70 ms against 0.87-1.14 direct (AMD
// EPYC, AVX-512) and 27.0 against 27.4 ms for the network's sequence (Intel), on 16 threads
// 7.65 against 7.35 (docs/benchmarks.md). Its results differ from the direct kernels' by
// rounding: within 1.5e-6 of the largest output at ResNet's shapes (float64 reference: direct
// 0.6e-6).
inline constexpr int kWinogradMaxThreads = 4;
// Winograd serves outputs of at least kWinogradMinSide^2 positions per image, 28x28 (smaller ones
// are bound by their weights; docs/adr/0036).
inline constexpr int64_t kWinogradMinSide = 28;
bool onednn_winograd_wanted();

// One convolution of a compiled graph (one node): its primitives, made once per input shape,
// and its weights in the primitive's layout, kept per weight (a repeated block's executable
// serves every instance of the block, each with weights of its own) while the weight's
// identity stays the same. Safe to run from many threads at once.
class OnednnConv {
 public:
  // once: run for one call (an eager op), so never as Winograd, whose weights take 0.7-30 ms
  // to convert into its layout at ResNet's shapes, more than one run saves.
  enum class Use { repeated, once };
  explicit OnednnConv(const ops::Conv2dAttrs& attrs, Use use = Use::repeated);
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

  // The same on dense f32 buffers of those shapes (x [N, H, W, C], w [C_out, C / groups, kh,
  // kw], out [N, OH, OW, C_out]; bias and residual may be null): what a compiled graph runs when
  // its operands are dense, with no tensor made per call.
  struct Dense {
    const float* x = nullptr;
    std::array<int64_t, 4> x_shape{};
    const float* w = nullptr;
    std::array<int64_t, 4> w_shape{};
    const float* bias = nullptr;
    const float* residual = nullptr;
    float* out = nullptr;
    int64_t out_numel = 0;
  };
  void run(const Dense& d, WeightIdentity weight) const;

  // How many times a weight was converted into the primitive's layout (a test's count).
  int64_t conversions() const;
  // How many runs were Winograd convolutions (a test's count).
  int64_t winograd_runs() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether max_pool2d of x with `attrs` runs on oneDNN's pooling kernel: an f32 [N, C, H, W] or
// channels-last input, no dilation, and windows that oneDNN's padding can describe.
bool onednn_max_pool_applies(const Tensor& x, const ops::Pool2dAttrs& attrs);
bool onednn_max_pool_applies(const Shape& x, DType dtype, const ops::Pool2dAttrs& attrs);
// max_pool2d into `out` (contiguous, the op's output shape): the eager kernel, and what a
// compiled graph on the CPU runs for the op. Only where onednn_max_pool_applies.
void onednn_max_pool(const Tensor& x, const Tensor& out, const ops::Pool2dAttrs& attrs);
// The same on dense f32 buffers of x's and out's shapes (a compiled graph's, no tensor made).
void onednn_max_pool(const float* x, const Shape& x_shape, float* out, const Shape& out_shape,
                     const ops::Pool2dAttrs& attrs);

// conv2d_nhwc's eager kernel on f32: an OnednnConv used once.
void onednn_conv_once(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      const Tensor& out, const ops::Conv2dAttrs& attrs);

}  // namespace zc::cpu
