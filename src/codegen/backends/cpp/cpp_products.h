// The library product (a BLAS call through ZcServices) a matmul kernel makes, if it makes one:
// decided here once, so that the emitter writes the call it describes and max_autotune
// (runtime/autotune.h) times the very problem the call computes.
#pragma once

#include <optional>

#include "codegen/kernel_ir.h"
#include "ops/gemm_choice.h"

namespace zc::codegen::cpp {

struct LibraryCall {
  // ta/tb, M (the batch folded in when `folded`), N, K, leading dims; the batch dims with more
  // than one product, with numeric strides (for a size template, those of the sizes the
  // schedule was made with: the emitter prints expressions instead).
  ops::GemmProblem problem;
  // The batch shape the call iterates over: d.batch, or all ones when the batch is folded
  // into the rows (a Linear on [B, T, d]).
  Shape batch;
};

// Whether a [rows, cols] operand with strides `strides` (its last two) is one BLAS reads: unit
// stride along one of its two matrix dims, row-major (trans false, ld the row stride) or
// column-major (trans true, ld the column stride).
bool blas_layout(const Shape& strides, int64_t rows, int64_t cols, bool* trans, int64_t* ld);

// Null when kernel `k` of `s` computes its product inline: not sent to a library by the policy,
// a vector operand, a dtype other than f32/f64, an empty product, or an operand that is
// unit-stride along neither of its matrix dims.
std::optional<LibraryCall> library_call(const Schedule& s, const Kernel& k);

}  // namespace zc::codegen::cpp
