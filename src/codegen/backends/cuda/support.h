// The CUDA backend's support kernels: what its executables and the eager ops need besides
// generated code. Today a strided copy (any layout of up to 16 dims to row-major), one kernel
// per element size, so a copy moves bits and never converts. Built once per machine through
// the kernel-level cache (Backend::support_source) and loaded once per process and device.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "zc/tensor.h"

namespace zc::codegen::cuda {

// The source of the support module.
const std::string& support_source();

// The support module's binary, kept so each device loads it when first used.
void set_support_binary(std::span<const uint8_t> cubin);

// A dense copy of `t` (a CUDA tensor, any strides) on its device's current stream.
Tensor dense_copy(const Tensor& t);

}  // namespace zc::codegen::cuda
