// Which matmul kernels of a schedule run as a cuBLASLt product, and which product: the
// operands' views (strides, offsets, broadcast batch dims) mapped onto cuBLASLt's strided,
// batched, possibly transposed form without moving data. A kernel whose product is stored (the
// scheduling policy chose the library path) and whose operands fit that form runs as one
// cuBLASLt call, followed by a generated kernel for its elementwise epilogue when it has one;
// any other matmul kernel is the generated tiled kernel. A function of the schedule alone, so
// the emitter and the loader agree.
#pragma once

#include <optional>

#include "codegen/kernel_ir.h"
#include "cuda/blaslt.h"

namespace zc::codegen::cuda {

struct LibraryMatmul {
  zc::cuda::GemmProblem problem;
  // The buffers holding A, B and D, and the element offset of each operand's first element.
  ir::ValueId a = -1, b = -1, d = -1;
  int64_t a_offset = 0, b_offset = 0, d_offset = 0;
};

std::optional<LibraryMatmul> library_matmul(const Schedule& s, const Kernel& k);

}  // namespace zc::codegen::cuda
