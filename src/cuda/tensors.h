// Tensors on CUDA devices: their storage comes from the caching allocator (on the current
// stream of the device) and their copies from the runtime's copy functions. This registers both
// with src/tensor when libzc is loaded, and gives kernels the address of a tensor's data.
#pragma once

#include <cuda.h>

#include "zc/tensor.h"

namespace zc::cuda {

// The device address of element 0 (storage plus offset). Raises zc::Error for a tensor that is
// not on a CUDA device; forces a traced tensor (a graph break).
CUdeviceptr device_address(const Tensor& t);

}  // namespace zc::cuda
