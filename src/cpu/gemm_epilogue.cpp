#include "cpu/gemm_epilogue.h"

#include "cpu/activation.h"
#include "cpu/threads.h"

namespace zc::cpu {

namespace {

// Whether the [rows, cols] matrices at p (leading dim lp) and q (lq) share memory.
bool overlap(const float* p, int64_t rows_p, int64_t cols_p, int64_t lp, const float* q,
             int64_t rows_q, int64_t cols_q, int64_t lq) {
  if (!p || !q || rows_p <= 0 || rows_q <= 0 || cols_p <= 0 || cols_q <= 0) return false;
  const float* p_end = p + (rows_p - 1) * lp + cols_p;
  const float* q_end = q + (rows_q - 1) * lq + cols_q;
  return p < q_end && q < p_end;
}

float activate(float x, GemmEpilogue::Act act) {
  switch (act) {
    case GemmEpilogue::Act::none:
      return x;
    case GemmEpilogue::Act::relu:
      return relu_value(x);
    case GemmEpilogue::Act::gelu_tanh:
      return gelu_value(x, true);
    case GemmEpilogue::Act::gelu_erf:
      return gelu_value(x, false);
  }
  return x;
}

}  // namespace

void apply_epilogue(int64_t m, int64_t n, const float* src, int64_t lds, float* dst, int64_t ldd,
                    const GemmEpilogue& e) {
  if (e.empty() && src == dst && lds == ldd) return;
  // Each row in passes with their conditions outside the loops, so that each vectorizes (a
  // test per element kept the loop scalar); the sums in the order v + bias + residual.
  const float* bias = e.bias;
  cpu::parallel_for_if(m * n >= 32768, m, [&](int64_t i) {
    const float* from = src + i * lds;
    const float* res = e.residual ? e.residual + i * e.ldr : nullptr;
    float* to = dst + i * ldd;
    if (bias && res) {
      for (int64_t j = 0; j < n; ++j) to[j] = from[j] + bias[j] + res[j];
    } else if (bias) {
      for (int64_t j = 0; j < n; ++j) to[j] = from[j] + bias[j];
    } else if (res) {
      for (int64_t j = 0; j < n; ++j) to[j] = from[j] + res[j];
    } else if (to != from) {
      for (int64_t j = 0; j < n; ++j) to[j] = from[j];
    }
    if (e.act != GemmEpilogue::Act::none) {
      for (int64_t j = 0; j < n; ++j) to[j] = activate(to[j], e.act);
    }
  });
}

bool output_is_read(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, const float* c, int64_t ldc,
                    const GemmEpilogue& e) {
  return overlap(c, m, n, ldc, a, ta ? k : m, ta ? m : k, lda) ||
         overlap(c, m, n, ldc, b, tb ? n : k, tb ? k : n, ldb) ||
         (e.residual && overlap(c, m, n, ldc, e.residual, m, n, e.ldr));
}

}  // namespace zc::cpu
