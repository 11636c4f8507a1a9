// The CUDA backend: generated CUDA C++, compiled by NVRTC (toolchain/nvrtc.h) to a cubin for
// the GPU's exact architecture, loaded and launched through the driver API (src/cuda/). The
// driver and NVRTC are opened at run time, so this backend is in every libzc built with the
// toolkit's headers and says why it cannot run where there is no GPU or no NVRTC.
//
// Every primitive op is generated (nothing runs as an extern call: the eager kernels of CUDA
// tensors are themselves compiled graphs), matmuls included, as a tiled kernel of any dtype.
#pragma once

#include <memory>
#include <string>

#include "codegen/backend.h"

namespace zc::codegen::cuda {

struct CudaOptions {
  // The architecture to build for ("sm_90"); empty: the GPU's own. Set, the backend builds
  // cubins without a GPU (tests, and bundles made for another machine), but loads only on one
  // of that architecture.
  std::string arch;
};

// The registered "cuda" backend uses the default options; tests make their own.
std::unique_ptr<Backend> make_cuda_backend(CudaOptions options = {});

}  // namespace zc::codegen::cuda
