// The CPU's GEMM libraries (cpu/blas.h): each one this build has, not only the one a process
// chooses, against a float64 reference over every transpose, sizes below and above a vector
// width and a leading dimension wider than the matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <omp.h>

#include "cpu/blas.h"

namespace zc {
namespace {

// f32 products of length K: the reference error bound grows with K (documented in
// docs/codegen.md: |error| <= 1e-5 * K * max|a| * max|b| with entries in [-1, 1]).
void check(cpu::GemmLibrary lib, bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  std::mt19937 gen(static_cast<unsigned>(m * 131 + n * 7 + k));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t pad = 3;  // leading dimensions wider than the matrices
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  std::vector<float> a(a_rows * lda), b(b_rows * ldb), c(m * ldc, -7.f);
  for (float& x : a) x = u(gen);
  for (float& x : b) x = u(gen);
  cpu::sgemm_on(lib, ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
  auto at = [&](int64_t i, int64_t p) { return ta ? a[p * lda + i] : a[i * lda + p]; };
  auto bt = [&](int64_t p, int64_t j) { return tb ? b[j * ldb + p] : b[p * ldb + j]; };
  const double tol = 1e-5 * static_cast<double>(k) + 1e-6;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < k; ++p) ref += static_cast<double>(at(i, p)) * bt(p, j);
      ASSERT_NEAR(c[i * ldc + j], ref, tol)
          << "library " << static_cast<int>(lib) << " ta " << ta << " tb " << tb << " m " << m
          << " n " << n << " k " << k << " at (" << i << ", " << j << ")";
    }
    for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], -7.f) << "wrote past n";
  }
}

TEST(CpuGemm, EveryLibraryOfThisBuildMatchesAFloat64Reference) {
  int libraries = 0;
  for (cpu::GemmLibrary lib : {cpu::GemmLibrary::openblas, cpu::GemmLibrary::onednn}) {
    if (!cpu::has_gemm_library(lib)) continue;
    ++libraries;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (int64_t m : {1, 7, 33}) {
          for (int64_t n : {1, 9, 64}) {
            for (int64_t k : {1, 8, 127}) check(lib, ta, tb, m, n, k);
          }
        }
      }
    }
    check(lib, false, true, 128, 200, 300);  // past the libraries' blocking
  }
  EXPECT_GE(libraries, 1);
}

// sgemm_batch over two batch dims with interleaved operands (attention's heads: A and B are
// column blocks of one wider matrix, C is dense), against each product computed alone.
void check_batch(int64_t b0, int64_t b1, int64_t m, int64_t k) {
  const int64_t n = m;  // B_i, transposed, is the same m rows as A_i
  std::mt19937 gen(static_cast<unsigned>(b0 * 31 + b1 * 7 + m + k));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t width = b1 * 2 * k;  // per row: A's k columns then B's, for each head
  std::vector<float> ab(b0 * m * width);
  for (float& x : ab) x = u(gen);
  std::vector<float> c(b0 * b1 * m * n, -7.f), want(m * n);
  // A_i is m x k at column 2k*j of batch i's rows, B_i the k columns after it.
  const int64_t batch[] = {2, b0, m * width, m * width, b1 * m * n, b1, 2 * k, 2 * k, m * n};
  cpu::sgemm_batch(false, true, m, n, k, ab.data(), width, ab.data() + k, width, c.data(), n,
                   batch);
  for (int64_t i = 0; i < b0; ++i) {
    for (int64_t j = 0; j < b1; ++j) {
      const float* a = ab.data() + i * m * width + j * 2 * k;
      cpu::sgemm(false, true, m, n, k, a, width, a + k, width, want.data(), n);
      const float* got = c.data() + (i * b1 + j) * m * n;
      for (int64_t e = 0; e < m * n; ++e) {
        ASSERT_NEAR(got[e], want[e], 1e-5 * k)
            << "product (" << i << ", " << j << ") element " << e;
      }
    }
  }
}

TEST(CpuGemm, BatchesRunSharedOutOrOneAfterAnother) {
  // Many small products: one per thread. Few large ones on a larger team: one after another,
  // each on all threads. Both give each product's own result.
  check_batch(4, 4, 32, 16);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(8);
  check_batch(1, 2, 96, 64);
  omp_set_num_threads(threads);
  check_batch(3, 1, 5, 3);
}

TEST(CpuGemm, TheChosenLibraryComputes) {
  std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8}, c(4);
  cpu::sgemm(false, false, 2, 2, 2, a.data(), 2, b.data(), 2, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{19, 22, 43, 50}));
  EXPECT_NE(cpu::gemm_libraries().find("f32: "), std::string::npos);
}

}  // namespace
}  // namespace zc
