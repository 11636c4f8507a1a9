// A GEMM problem as generated code would pass it (cpu/gemm_choice.h): row-major, each operand
// transposed or not, its leading dim `pad` elements longer than its rows (C's unpadded).
#pragma once

#include "cpu/gemm_choice.h"

namespace zc::test {

inline cpu::GemmProblem gemm_problem(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                     int64_t pad = 0) {
  cpu::GemmProblem p;
  p.dtype = dt;
  p.ta = ta;
  p.tb = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = (ta ? m : k) + pad;
  p.ldb = (tb ? k : n) + pad;
  p.ldc = n;
  return p;
}

}  // namespace zc::test
