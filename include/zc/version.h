// Version and build identity.
#pragma once

#include <string>

namespace zc {

std::string version();  // "0.1.0"
// SHA-256 over zc's own sources, computed at build time; part of every cache key.
std::string build_id();
std::string compiler_id();   // the compiler that built libzc
std::string cpu_features();  // "avx2 fma avx512f ..." as detected at run time
std::string blas_info();     // the BLAS library eager matmul uses
// The CPU threads zc's parallel work uses and where the number comes from (ZC_NUM_THREADS, else
// OpenMP's), or what is wrong with ZC_NUM_THREADS.
std::string cpu_threads_info();
// How f32 CPU convolutions run (ZC_CPU_CONV, docs/onnx.md): oneDNN's channels-last kernels and
// whether 3x3 ones take Winograd, or columns and a product; or what is wrong with ZC_CPU_CONV.
std::string cpu_conv_info();

}  // namespace zc
