// The Executable of the CUDA backend: a cubin loaded on one device, its launch plan, the
// schedule's constants copied to the device. Inputs are CUDA tensors, dense (the runtime makes
// strided ones dense first); each call allocates its outputs and a scratch arena from the
// caching allocator and launches every kernel on the device's current stream, so calls queue
// behind each other like eager ops and return without waiting for the GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codegen/buffer_plan.h"
#include "codegen/executable.h"

namespace zc::codegen::cuda {

// The architecture name of `device` ("sm_90"), or empty with the reason in `why` when there is
// no usable GPU.
std::string device_arch(int device, std::string* why);

// Loads `cubin` (built from emit()'s source for this schedule and plan) on the device the
// graph's inputs live on. Raises zc::Error when the driver refuses it (another architecture)
// or a kernel is missing. `symbols`: the symbol values of a size template's cubin at this
// size (every kernel of a symbolic schedule takes them, ZcSym); empty for code of one size.
std::shared_ptr<const Executable> make_cuda_executable(Schedule schedule, BufferPlan plan,
                                                       std::span<const uint8_t> cubin,
                                                       std::vector<int64_t> symbols = {});

}  // namespace zc::codegen::cuda
