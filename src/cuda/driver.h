// The CUDA driver API, opened at run time. libzc links no CUDA library, so one build runs on
// machines with and without a GPU; the driver (libcuda.so.1) is loaded, every function below is
// resolved and cuInit runs, once, on the first call of driver() or driver_available(), from any
// thread. After that the table never changes and is never destroyed, so it stays usable while
// the process exits.
//
// Members are named and called as the functions of the CUDA headers are:
// driver().cuMemAlloc(&p, n). Where the headers map a name to a versioned entry point
// (cuMemAlloc to cuMemAlloc_v2, cuGraphInstantiate to cuGraphInstantiateWithFlags), the member
// and the symbol looked up are that entry point, as they would be for a program linked against
// libcuda.
#pragma once

#include <cuda.h>

#include <string>
#include <string_view>

// X(name) for every driver function zc uses.
#define ZC_CUDA_DRIVER_FUNCTIONS(X)   \
  X(cuGetErrorName)                   \
  X(cuGetErrorString)                 \
  X(cuInit)                           \
  X(cuDriverGetVersion)               \
  X(cuDeviceGetCount)                 \
  X(cuDeviceGet)                      \
  X(cuDeviceGetName)                  \
  X(cuDeviceGetAttribute)             \
  X(cuDeviceTotalMem)                 \
  X(cuDeviceCanAccessPeer)            \
  X(cuDevicePrimaryCtxRetain)         \
  X(cuDevicePrimaryCtxRelease)        \
  X(cuCtxSetCurrent)                  \
  X(cuCtxGetCurrent)                  \
  X(cuCtxSynchronize)                 \
  X(cuMemAlloc)                       \
  X(cuMemFree)                        \
  X(cuMemGetInfo)                     \
  X(cuMemcpyHtoD)                     \
  X(cuMemcpyDtoH)                     \
  X(cuMemcpyDtoD)                     \
  X(cuMemcpyHtoDAsync)                \
  X(cuMemcpyDtoHAsync)                \
  X(cuMemcpyDtoDAsync)                \
  X(cuMemcpyPeerAsync)                \
  X(cuMemsetD8Async)                  \
  X(cuMemsetD32Async)                 \
  X(cuStreamCreate)                   \
  X(cuStreamDestroy)                  \
  X(cuStreamSynchronize)              \
  X(cuStreamQuery)                    \
  X(cuStreamBeginCapture)             \
  X(cuStreamEndCapture)               \
  X(cuEventCreate)                    \
  X(cuEventRecord)                    \
  X(cuEventSynchronize)               \
  X(cuEventQuery)                     \
  X(cuEventElapsedTime)               \
  X(cuEventDestroy)                   \
  X(cuModuleLoadData)                 \
  X(cuModuleUnload)                   \
  X(cuModuleGetFunction)              \
  X(cuFuncSetAttribute)               \
  X(cuFuncGetAttribute)               \
  X(cuLaunchKernel)                   \
  X(cuOccupancyMaxPotentialBlockSize) \
  X(cuGraphInstantiate)               \
  X(cuGraphLaunch)                    \
  X(cuGraphExecDestroy)               \
  X(cuGraphDestroy)

namespace zc::cuda {

struct Driver {
#define ZC_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  ZC_CUDA_DRIVER_FUNCTIONS(ZC_CUDA_DRIVER_MEMBER)
#undef ZC_CUDA_DRIVER_MEMBER
  // Optional: null on a driver older than CUDA 12.4, where a kernel loads at its first launch.
  decltype(&::cuFuncLoad) cuFuncLoad = nullptr;
  int version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
};

// The loaded driver, or a zc::Error saying why there is none and what to do about it.
const Driver& driver();
// Whether driver() would succeed; otherwise `why` (when not null) receives the reason. Never
// raises.
bool driver_available(std::string* why = nullptr);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; usable before the driver has loaded.
std::string error_text(CUresult r);

[[noreturn]] void raise_error(CUresult r, std::string_view what);
// Raises zc::Error with `what`, the error's name and description unless r is CUDA_SUCCESS.
inline void check(CUresult r, std::string_view what) {
  if (r != CUDA_SUCCESS) [[unlikely]]
    raise_error(r, what);
}

}  // namespace zc::cuda
