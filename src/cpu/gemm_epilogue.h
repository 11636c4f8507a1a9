// What a library product's epilogue does to C = op(A) op(B), as generated code passes it
// (codegen/backends/cpp/abi.h, ZcEpilogue): a bias row, a residual, then ReLU or GELU. oneDNN
// runs it inside the product (cpu/onednn_matmul.h); every other way a product runs (OpenBLAS,
// bf16 operands, a problem oneDNN refuses) runs apply_epilogue after it.
#pragma once

#include <cstdint>

#include "ops/epilogue_act.h"

namespace zc::cpu {

// In this order: adds `bias` (n values, the same for every row), adds `residual` (an [m, n]
// matrix, row-major with leading dim ldr), then applies `act`. Empty: C as the product.
struct GemmEpilogue {
  using Act = ops::EpilogueAct;
  const float* bias = nullptr;
  const float* residual = nullptr;
  int64_t ldr = 0;
  Act act = Act::none;
  bool empty() const { return !bias && !residual && act == Act::none; }
};

// dst = the epilogue of src (each [m, n], row-major with leading dims lds and ldd), on the
// calling thread's OpenMP team, with the activations' eager definitions (cpu/activation.h).
// dst may be src or the residual (element for element), nothing else they share.
void apply_epilogue(int64_t m, int64_t n, const float* src, int64_t lds, float* dst, int64_t ldd,
                    const GemmEpilogue& e);

// Whether C[m, n] at c (leading dim ldc) shares memory with what the product and its epilogue
// read (A, B, the residual): then C cannot be written before they are all read.
bool output_is_read(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, const float* c, int64_t ldc,
                    const GemmEpilogue& e);

}  // namespace zc::cpu
