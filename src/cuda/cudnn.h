// cuDNN, for the CUDA backend's convolutions (with ZC_CUDA_CONV=cudnn): found by its file and
// opened at run time, like cuBLASLt (cuda/blaslt_library.h), so that zc builds and runs without
// it; otherwise convolutions on a GPU are generated as columns and a cuBLASLt product.
//
// Only cuDNN 9's legacy convolution API is used (descriptors, cudnnConvolutionForward and
// cudnnConvolutionBiasActivationForward), declared by zc itself: no cuDNN header is needed to
// build zc, and its ABI (opaque handles, enums of fixed values) is stable within version 9.
// The file: libcudnn.so.9, then libcudnn.so, in cuda_library_dirs() (CUDA_HOME, the toolkit,
// LD_LIBRARY_PATH: where a pip-installed nvidia-cudnn puts it, the loader's directories). The
// library loads the rest of cuDNN from its own directory.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "toolchain/library_file.h"
#include "zc/dtype.h"

namespace zc::cuda {

// The library's file, searched once per process; never loads it. nullopt, with the reason in
// `why`, when there is none.
std::optional<toolchain::LibraryFile> find_cudnn(std::string* why = nullptr);
// "cudnn{path=...;...}" for cache keys; empty when not found.
std::string cudnn_identity();
// Whether the CUDA backend runs its convolutions through cuDNN: ZC_CUDA_CONV=cudnn and the
// library is found. Off by default: through this legacy API cuDNN 9's heuristic takes slower
// kernels than the generated columns and cuBLASLt products for ResNet-152 in f32 (11.3 against
// 10.3 ms on an H100; docs/adr/0030), so it is there to measure and to build on.
bool cudnn_convolutions();

// One convolution as the CUDA backend runs it: conv2d's [N, C, H, W] input, its weight
// [K, C / groups, R, S] (a strided one is copied dense first: cuDNN's filters are packed), an
// optional bias [K], then its epilogue (a residual of the output's shape; a ReLU), into a
// dense [N, K, OH, OW] output. Operands other than the output may have any strides.
struct ConvProblem {
  DType dtype = DType::f32;
  std::array<int64_t, 4> x{}, x_strides{};
  std::array<int64_t, 4> w{}, w_strides{};
  std::array<int64_t, 4> y{};
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, groups = 1;
  bool bias = false;
  int64_t bias_stride = 1;
  bool residual = false;
  std::array<int64_t, 4> z_strides{};
  bool relu = false;
  bool tf32 = false;  // f32 may round to TF32 on tensor cores (MatmulPrecision::Tf32)
};

// A convolution's descriptors, cuDNN's algorithm for it and the scratch it needs, made once
// per executable on `device`. f32 runs without TF32 (CUDNN_FMA_MATH: every product in full
// precision, as the rest of zc computes f32); f16 and bf16 accumulate in f32, f64 in f64.
// Padding cuDNN cannot express (different before and after) is applied by copying the input
// into the scratch first, as is a weight that is not dense.
class ConvPlan {
 public:
  // Raises zc::Error naming the problem and cuDNN's words when cuDNN cannot run it.
  ConvPlan(const ConvProblem& p, int device);
  ~ConvPlan();
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  // Scratch bytes run() needs, 256-byte aligned.
  size_t workspace_bytes() const;
  // "implicit_precomp_gemm, 1.2 MB" for logs.
  std::string describe() const;
  // Queues the convolution on `stream`; `bias` and `residual` are 0 where the problem has none.
  // Calls from several threads are serialized per device (cuDNN's handle is one per device).
  void run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y,
           CUdeviceptr workspace, CUstream stream) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace zc::cuda
