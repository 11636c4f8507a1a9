// The library product (a BLAS call through ZcServices) a matmul kernel makes, if it makes one:
// decided here once, so that the emitter writes the call it describes and max_autotune
// (runtime/products/autotune.h) times the very problem the call computes.
#pragma once

#include <optional>

#include "codegen/kernel_ir.h"
#include "cpu/gemm_choice.h"
#include "ops/epilogue_act.h"

namespace zc::codegen::cpp {

struct LibraryCall {
  // ta/tb, M (the batch folded in when `folded`), N, K, leading dims; the batch dims with more
  // than one product, with numeric strides (for a size template, those of the sizes the
  // schedule was made with: the emitter prints expressions instead).
  cpu::GemmProblem problem;
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

// A library product's epilogue that the product's call runs itself (ZcEpilogue, oneDNN's bias
// and post-ops; cpu/onednn_matmul.h): after the product C the kernel adds a row vector (`bias`,
// C's last dim, the same for every row) and/or a value of C's shape (`residual`), then applies
// an op whose registry entry is an epilogue activation (relu, gelu), each at most once and in
// that order, and stores only the last value (`out`), whose rows, like the residual's, are
// evenly spaced with unit stride along them. The call then writes `out` and the kernel runs no
// loop after it.
struct FusedEpilogue {
  ir::ValueId out = -1;
  int64_t ldo = 0;
  ir::ValueId bias = -1, residual = -1;
  int64_t ldr = 0;
  ops::EpilogueAct act = ops::EpilogueAct::none;
};
// Null when the epilogue is anything else, or the call is a batch or not f32. In code that
// serves many sizes (a size template) the decision is part of the template's text, which is
// checked at every size before it runs there, so a size where it differs gets its own code.
std::optional<FusedEpilogue> fused_epilogue(const Schedule& s, const Kernel& k,
                                            const LibraryCall& call);

}  // namespace zc::codegen::cpp
