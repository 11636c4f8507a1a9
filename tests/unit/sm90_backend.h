// For tests that build CUDA code without running it: a CUDA backend for sm_90 (an H100), which
// NVRTC serves whether or not this machine has a GPU, and the skip for machines without NVRTC.
#pragma once

#if ZC_WITH_CUDA

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "codegen/backends/cuda/backend.h"

namespace zc::test {

inline std::unique_ptr<codegen::Backend> sm90() {
  return codegen::cuda::make_cuda_backend({.arch = "sm_90"});
}

}  // namespace zc::test

#define SKIP_WITHOUT_NVRTC(backend)                                     \
  if (std::string why = (backend).unavailable_reason(); !why.empty()) { \
    GTEST_SKIP() << "NVRTC cannot run here: " << why;                   \
  }

#endif  // ZC_WITH_CUDA
