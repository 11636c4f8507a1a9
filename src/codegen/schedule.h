// schedule(): groups the nodes of a lowered graph into kernels (see kernel_ir.h).
//
// Input: a verified graph of primitive ops only. Output: every node belongs to exactly one
// kernel or is a layout op whose output is an alias; kernels are in an order where each reads
// only values written by earlier kernels, inputs or constants; every value read across a
// kernel boundary is materialized; every graph output is a stored value of its own.
//
// Fusion rules: an elementwise node joins the open kernel that computes one of its inputs
// when the iteration spaces agree (pointwise: same shape; matmul epilogue: the matmul's output
// shape; row_reduce: the input shape, or the row shape for row-level values). A reduction
// turns the pointwise kernel of its input into a row_reduce kernel. A kernel closes as soon as
// a later kernel reads one of its values, which keeps the kernel order acyclic.
#pragma once

#include <vector>

#include "codegen/kernel_ir.h"

namespace zc::codegen {

struct ScheduleOptions {
  // Matmuls with at most this many multiply-adds are generated inline; larger ones call BLAS.
  // Measured (bench/codegen BM_MatmulInlineVsBlas, docs/codegen.md): inline wins at 8^3,
  // BLAS from 16^3; the threshold sits between them.
  int64_t inline_matmul_max_flops = 12 * 12 * 12;
  // Ops to run through their eager kernel even though the backend could generate them
  // (debugging a miscompile, and testing the extern path).
  std::vector<ops::OpId> force_extern;
};

Schedule schedule(const ir::Graph& g, const ScheduleOptions& options);

}  // namespace zc::codegen
