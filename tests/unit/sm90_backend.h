// For tests that build CUDA code without running it: a CUDA backend for sm_90 (an H100), which
// NVRTC serves whether or not this machine has a GPU, and the skip for machines without NVRTC.
#pragma once

#if ZC_WITH_CUDA

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "codegen/backends/cuda/backend.h"
#include "codegen/backends/cuda/programs.h"

namespace zc::test {

inline std::unique_ptr<codegen::Backend> sm90() {
  return codegen::cuda::make_cuda_backend({.arch = "sm_90"});
}

// Whether a CUDA build's binary is cubins (ELF files): one, or several (programs.h).
inline bool cubins_are_elf(const std::vector<uint8_t>& binary) {
  const std::vector<std::vector<uint8_t>> cubins = codegen::cuda::unpack_cubins(binary);
  for (const std::vector<uint8_t>& b : cubins) {
    if (b.size() <= 4 || b[0] != 0x7f || b[1] != 'E' || b[2] != 'L' || b[3] != 'F') return false;
  }
  return !cubins.empty();
}

}  // namespace zc::test

#define SKIP_WITHOUT_NVRTC(backend)                                     \
  if (std::string why = (backend).unavailable_reason(); !why.empty()) { \
    GTEST_SKIP() << "NVRTC cannot run here: " << why;                   \
  }

#endif  // ZC_WITH_CUDA
