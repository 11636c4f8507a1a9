#include "cpu/gemm.h"

#include <algorithm>
#include <vector>

#include "cpu/blas.h"

namespace zc::cpu {

namespace {

template <class T>
void gemm_small(int64_t M, int64_t N, int64_t K, MatView A, MatView B, T* C) {
  const T* a = static_cast<const T*>(A.data);
  const T* b = static_cast<const T*>(B.data);
  for (int64_t i = 0; i < M * N; ++i) C[i] = T(0);
  // i-k-j order: the inner loop runs along a row of B and of C, which vectorizes when B is
  // row-major.
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * N;
    for (int64_t k = 0; k < K; ++k) {
      T av = a[i * A.row_stride + k * A.col_stride];
      const T* brow = b + k * B.row_stride;
      if (B.col_stride == 1) {
        for (int64_t j = 0; j < N; ++j) c[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < N; ++j) c[j] += av * brow[j * B.col_stride];
      }
    }
  }
}

// BLAS wants each operand row- or column-major with a leading dimension; anything else is
// copied first.
template <class T>
bool blas_layout(const MatView& m, int64_t rows, int64_t cols, bool* trans, int64_t* ld) {
  if (m.col_stride == 1 && (rows <= 1 || m.row_stride >= std::max<int64_t>(cols, 1))) {
    *trans = false;
    *ld = std::max<int64_t>(rows <= 1 ? cols : m.row_stride, 1);
    return true;
  }
  if (m.row_stride == 1 && (cols <= 1 || m.col_stride >= std::max<int64_t>(rows, 1))) {
    *trans = true;
    *ld = std::max<int64_t>(cols <= 1 ? rows : m.col_stride, 1);
    return true;
  }
  return false;
}

template <class T>
void gemm_blas(int64_t M, int64_t N, int64_t K, MatView A, MatView B, T* C) {
  std::vector<T> a_copy, b_copy;
  bool ta, tb;
  int64_t lda, ldb;
  auto pack = [](const MatView& m, int64_t rows, int64_t cols, std::vector<T>& buf) {
    buf.resize(rows * cols);
    const T* p = static_cast<const T*>(m.data);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = p[i * m.row_stride + j * m.col_stride];
    }
    return MatView{buf.data(), cols, 1};
  };
  if (!blas_layout<T>(A, M, K, &ta, &lda)) {
    A = pack(A, M, K, a_copy);
    blas_layout<T>(A, M, K, &ta, &lda);
  }
  if (!blas_layout<T>(B, K, N, &tb, &ldb)) {
    B = pack(B, K, N, b_copy);
    blas_layout<T>(B, K, N, &tb, &ldb);
  }
  if constexpr (std::is_same_v<T, float>) {
    sgemm(ta, tb, M, N, K, static_cast<const float*>(A.data), lda,
          static_cast<const float*>(B.data), ldb, C, std::max<int64_t>(N, 1));
  } else {
    dgemm(ta, tb, M, N, K, static_cast<const double*>(A.data), lda,
          static_cast<const double*>(B.data), ldb, C, std::max<int64_t>(N, 1));
  }
}

}  // namespace

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, MatView A, MatView B, T* C) {
  if (M == 0 || N == 0) return;
  if constexpr (std::is_floating_point_v<T>) {
    if (M * N * K > kSmallGemmFlops && K > 0) return gemm_blas<T>(M, N, K, A, B, C);
  }
  gemm_small<T>(M, N, K, A, B, C);
}

template void gemm<float>(int64_t, int64_t, int64_t, MatView, MatView, float*);
template void gemm<double>(int64_t, int64_t, int64_t, MatView, MatView, double*);
template void gemm<int64_t>(int64_t, int64_t, int64_t, MatView, MatView, int64_t*);
template void gemm<int32_t>(int64_t, int64_t, int64_t, MatView, MatView, int32_t*);

}  // namespace zc::cpu
