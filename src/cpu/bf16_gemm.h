// f32 products with bf16 operands (CompileOptions::matmul_precision = MatmulPrecision::Bf16):
// A and B rounded to bfloat16 (round to nearest even), their products accumulated in f32 into
// an f32 C, through oneDNN's matmul primitive, which runs them on AMX or AVX-512 BF16 where the
// CPU has them (2.5-4x the f32 rate on the GPU host's Xeon at the GPT's shapes; docs/codegen.md).
// Each operand's rounding costs a relative 2^-9; a product over K terms lands within about
// 2^-8 sqrt(K) of the f32 result relative to its magnitude.
//
// Both operands are converted on every call, so a weight changed in place between calls is
// always read as it is. The primitives and conversions of each problem are made once per
// process and kept, 512 problems at most (past that one is dropped for each new one).
#pragma once

#include <cstdint>

namespace zc::cpu {

// Whether this process can run bf16 products (oneDNN built in and a bf16 matmul for this CPU;
// checked once).
bool bf16_gemm_available();

// Row-major C[m, n] = op(A) op(B) as above (arguments as cpu/blas.h's sgemm). False, with C
// untouched, when bf16 products are unavailable or oneDNN refuses the problem: the caller then
// runs it in f32.
bool sgemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace zc::cpu
