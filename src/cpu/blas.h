// The CPU's BLAS products. Every f32 and f64 GEMM zc runs on the CPU comes through here: eager
// matmul (cpu/gemm.h) directly, generated code through ZcServices (codegen/backends/cpp/abi.h).
//
// f32 goes to oneDNN's dnnl_sgemm when zc is built with oneDNN (libdnnl-dev), otherwise to
// OpenBLAS; f64 always to OpenBLAS (oneDNN has no f64 GEMM). oneDNN picks its kernels from the
// CPU's instruction set at run time, and OpenBLAS 0.3.21 (Debian 12) does not know Sapphire
// Rapids: it falls back to its Prescott (SSE3) kernels there and ran the models' products 3-5x
// slower than oneDNN on the GPU host's 16-core Xeon. On this project's 2-core AVX2 machine the
// two tie on the large products and oneDNN is 1.6x faster on attention's small ones
// (docs/codegen.md has the figures; bench/cpu_gemm.cpp measures them).
//
// oneDNN generates its GEMM kernels on a process's first product, whatever its shape: about
// 15 ms here, 30-40 ms more than OpenBLAS's first call on the 16-core host. That lands in a warm
// process's first call; generating them on a background thread at compile() crashed processes
// that exited while it ran (tried and removed, docs/codegen.md).
//
// ZC_CPU_GEMM=openblas sends f32 to OpenBLAS as well (read once per process): for comparisons,
// and as a way out should oneDNN misbehave somewhere. Both libraries run on libgomp's threads,
// as zc's generated loops do; called inside a parallel region, each runs on one thread.
#pragma once

#include <cstdint>
#include <string>

#include "cpu/gemm_choice.h"
#include "cpu/gemm_epilogue.h"

namespace zc::cpu {

enum class GemmLibrary { openblas, onednn };

// Whether this build has `lib` (OpenBLAS always; oneDNN when built with it).
bool has_gemm_library(GemmLibrary lib);

// Row-major C[m, n] = op(A) op(B), with op transposing when ta/tb; ld* in elements. sgemm_on
// runs one library (the tests try each); sgemm the one this process chose.
void sgemm_on(GemmLibrary lib, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc);
void dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
           const double* b, int64_t ldb, double* c, int64_t ldc);

// Whether `count` independent products of `multiply_adds` each run better one per thread (each
// library call then on its thread alone) than one after another on all threads: when there are
// at least as many as threads, or each is too small to split (under 64x64x16).
bool share_batch_out(int64_t count, int64_t multiply_adds);

// A batch of products of one shape (attention's heads): `batch` is {ndim, then per batch dim
// its count and the strides, in elements, of A, B and C along it}, the layout generated code
// passes. Shared out or not by share_batch_out.
void sgemm_batch(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc, const int64_t* batch);
void dgemm_batch(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double* c, int64_t ldc, const int64_t* batch);

// The same, run as `choice` says (cpu/gemm_choice.h): generated code's services pass the choice
// max_autotune made for the call site, GemmChoice{} without one. A library this build lacks
// (oneDNN) runs on the one it has.
void sgemm_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
void dgemm_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a,
              int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);
void sgemm_batch_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                    const int64_t* batch);
void dgemm_batch_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const double* a, int64_t lda, const double* b, int64_t ldb, double* c,
                    int64_t ldc, const int64_t* batch);

// An f32 product and its epilogue (cpu/onednn_matmul.h), run as `choice` says: on `site`'s
// oneDNN matmul with the epilogue fused where the library is oneDNN and bf16 operands do not
// apply (B kept packed when the choice is onednn_packed and `b_id` is known), else the product
// on its library and the epilogue after it. `site` null: never fused.
void sgemm_ex(GemmChoice choice, const OnednnMatmul* site, WeightIdentity b_id, bool ta, bool tb,
              int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc, const GemmEpilogue& e);
// The product on `lib` (with bf16 operands if `bf16` and this process can), then the epilogue:
// straight into C when C shares memory with nothing they read, else through a temporary.
void product_then_epilogue(GemmLibrary lib, bool bf16, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                           float* c, int64_t ldc, const GemmEpilogue& e);

// The library f32 products go to in this process without a choice (ZC_CPU_GEMM).
GemmLibrary default_f32_library();

// What each dtype goes to in this process, for `zc env`: "f32: oneDNN 2.6.3 (dnnl_sgemm); f64
// and the rest: OpenBLAS 0.3.21 ... (threads: 16); bf16 products (MatmulPrecision::Bf16): yes".
std::string gemm_libraries();
// The same without the thread count, which changes as calls set their teams: what a
// measurement of the libraries is valid for (runtime/products/autotune.h).
std::string gemm_library_versions();

}  // namespace zc::cpu
