// schedule(): groups the nodes of a lowered graph into kernels (see kernel_ir.h).
//
// Input: a verified graph of primitive ops only. Output: a schedule that verify_schedule()
// accepts: every node belongs to exactly one kernel or is a view whose output is an alias;
// kernels are in an order where each reads only values written by earlier kernels, inputs or
// constants; every value read across a kernel boundary is materialized; every graph output is
// a stored value of its own.
//
// Fusion rules (the scheduler's own; targets differ only in the policy below): an elementwise
// node joins the open kernel that computes one of its inputs when the iteration spaces agree
// (pointwise: same shape; matmul epilogue: the matmul's output shape; row_reduce: the input
// shape, or the row shape for row-level values). A reduction turns the pointwise kernel of its
// input into a row_reduce kernel. A kernel closes as soon as a later kernel reads one of its
// values, which keeps the kernel order acyclic. With ZC_LOGS=fusion, every node that could have
// joined a kernel and did not is logged with the reason.
#pragma once

#include <vector>

#include "codegen/kernel_ir.h"
#include "ops/shape_rules.h"

namespace zc::codegen {

// The target-dependent decisions the scheduler asks of a backend.
class SchedulePolicy {
 public:
  virtual ~SchedulePolicy() = default;

  // Whether generated code computes `op` producing `dtype`; a node it does not runs as an
  // extern call to the op's eager kernel.
  virtual bool supports(ops::OpId op, DType dtype) const = 0;

  // Where a matmul runs: a loop generated inline (fusing its epilogue in registers), a library
  // call (BLAS, cuBLAS) writing memory that its epilogue then reads, or the eager kernel.
  enum class MatmulPath : uint8_t { inline_loop, library, extern_call };
  virtual MatmulPath matmul_path(const ops::MatmulShapes& dims, DType dtype) const = 0;
  // The same for a product whose sizes vary (Schedule::varying): one path for every size, as
  // the generated code serves them all. Default: the eager kernel, which takes any size.
  virtual MatmulPath matmul_path_any_size(const ops::MatmulShapes& dims, DType dtype) const {
    (void)dims, (void)dtype;
    return MatmulPath::extern_call;
  }

  // Whether a product of fixed sizes `dims` whose operands both run along k in memory (a linear
  // layer's x [M, K] times its weight [N, K] read as W^T) is generated as a kernel that streams
  // the right operand's rows (Kernel::rows) instead of going where matmul_path says: a product
  // of a few rows reads each weight element once, and a library's tiles idle there (a decode
  // step's products, M = 1). Default: never.
  virtual bool matmul_streams_rows(const ops::MatmulShapes& dims, DType dtype) const {
    (void)dims, (void)dtype;
    return false;
  }

  // Whether a generated matmul kernel reads an int8 graph input, parameter or constant itself
  // where the graph casts it to a float for the product (a weight-only int8 layer: its weight
  // stays one byte an element in memory). Such casts become converting aliases, and the
  // products reading them are generated whatever matmul_path says. Default: no.
  virtual bool matmul_reads_int8_operands() const { return false; }

  // Whether a matmul kernel reads f16/bf16 operands itself where the graph casts them to f32
  // first (a library that multiplies half inputs on tensor cores with f32 accumulation, which
  // is the cast's numerics exactly). Such casts become converting aliases (see kernel_ir.h).
  virtual bool matmul_reads_half_operands() const { return false; }

  // Whether elementwise nodes, reductions and attention may read an f16/bf16 graph input,
  // parameter or constant through a converting alias where the graph casts it to f32 (a
  // layer_norm's bf16 weight): the cast is exact, so it needs no kernel and no f32 copy.
  virtual bool elementwise_reads_half_inputs() const { return false; }

  // Which kernels of `s` the backend may run at the same time (the CUDA backend packs
  // independent launches, cuda/packs.h): per kernel, the last kernel of the run it is in (itself
  // when alone), so that plan_buffers gives values read or written within a run bytes of their
  // own. Empty: every kernel runs alone, one after another. Default: empty.
  virtual std::vector<int32_t> runs_together(const Schedule& s) const {
    (void)s;
    return {};
  }
};

// `varying`: per value of `g`, the dims that vary (Schedule::varying); empty for one size.
Schedule schedule(const ir::Graph& g, const SchedulePolicy& policy,
                  std::vector<uint64_t> varying = {});

}  // namespace zc::codegen
