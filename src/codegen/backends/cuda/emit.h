// The CUDA backend's emitter: one self-contained CUDA C++ source (no #include: NVRTC compiles
// it as it is) with one extern "C" __global__ function per kernel of the schedule, named and
// parametrized as launch_plan() says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/buffer_plan.h"

namespace zc::codegen::cuda {

struct CudaModule {
  std::string source;
  int kernels = 0;
  int extern_ops = 0;          // convolutions run by cuDNN (launch.h: Launch::conv)
  std::vector<int64_t> sizes;  // for a schedule whose sizes vary (GeneratedSource::sizes)
};

CudaModule emit(const Schedule& s, const BufferPlan& plan);

}  // namespace zc::codegen::cuda
