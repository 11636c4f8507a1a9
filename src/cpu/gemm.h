// C = A B (+ C when accumulate) for one matrix product, with A and B given by strides so that
// transposed views need no copy. Large products go to BLAS; small ones (where a library call
// costs more than the arithmetic, like seed64's 10x10) run an inline loop.
#pragma once

#include <cstdint>

namespace zc::cpu {

struct MatView {
  const void* data;
  int64_t row_stride, col_stride;  // in elements
};

// Products with at most this many multiply-adds skip BLAS.
inline constexpr int64_t kSmallGemmFlops = 32 * 32 * 32;

// T is float, double, int64_t or int32_t. C is contiguous [M, N].
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, MatView A, MatView B, T* C);

}  // namespace zc::cpu
