// The C++ backend for the CPU: generated C++ with OpenMP, built into a shared object by the
// system compiler (toolchain/) and loaded from memory. Small matmuls are generated inline with
// their epilogue; large f32 and f64 ones call BLAS; anything else large runs its eager kernel.
#pragma once

#include <memory>
#include <vector>

#include "codegen/backend.h"
#include "codegen/backends/cpp/emit.h"

namespace zc::codegen::cpp {

struct CppOptions {
  // Matmuls with at most this many multiply-adds are generated inline; larger ones call BLAS.
  // Measured (bench/codegen BM_MatmulInlineVsBlas, docs/codegen.md): inline wins at 8^3,
  // BLAS from 16^3; the threshold sits between them.
  int64_t inline_matmul_max_flops = 12 * 12 * 12;
  EmitOptions emit;
  // Attention as one kernel whose scores stay in cache-sized blocks (attention.cpp); off,
  // it is decomposed into batched products around a softmax kernel (bench/codegen's
  // BM_Attention compares the two).
  bool attention_kernel = true;
  // Ops to run through their eager kernel even though the backend could generate them
  // (debugging a miscompile, and testing the extern path).
  std::vector<ops::OpId> force_extern;
};

// The registered "cpp" backend uses the default options; tests and benchmarks make their own.
std::unique_ptr<Backend> make_cpp_backend(CppOptions options = {});

}  // namespace zc::codegen::cpp
