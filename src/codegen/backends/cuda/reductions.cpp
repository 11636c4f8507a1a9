// Row reductions: one block per row. Each reduction of the kernel is a pass over the row's
// elements, each thread striding by the block size (computing the element values it needs on
// the way) and the block combining the threads' partial results; row-level values then live in
// every thread's registers, element-level stores make one more pass, row-level stores are
// written by thread 0. In the column form (launch.h) a block takes kColumnRows rows along x,
// and the threads along y share a row: the same passes, striding by blockDim.y, and the
// partial results combined per row. Floating sums accumulate in double and integer ones in int64,
// as the eager kernels do.
#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"

namespace zc::codegen::cuda {

using ops::OpId;

namespace {

std::string sum_type(DType type) {
  return is_floating(type) ? "double" : "int64_t";
}

// amax, amin, argmax keep a value and its position. Bools compare as 0 and 1 (shuffles move
// no bools).
std::string pick_type(DType type) {
  return type == DType::boolean ? "int32_t" : compute_type(type);
}

std::string pick_max(OpId op) {
  return op == OpId::amin ? "false" : "true";
}

}  // namespace

std::optional<KernelEmitter::Names> KernelEmitter::open_rows(const Kernel&, const Shape& outer,
                                                             const Shape&) {
  const Launch& l = *launch_;
  if (l.work == 0) return std::nullopt;
  const std::string work = num(l.work);
  if (l.columns) {
    // kColumnRows rows a block, one per x; a thread past the last row reads the last row
    // (every thread takes part in the block's sums) and stores nothing.
    w_.line("__shared__ __align__(16) unsigned char zc_smem[" +
            std::to_string(kColumnThreads * (kColumnRows + 1) * 8) + "];");
    w_.open("for (idx_t zc_rb = (idx_t)blockIdx.x * " + std::to_string(kColumnRows) + "; zc_rb < " +
            work + "; zc_rb += (idx_t)gridDim.x * " + std::to_string(kColumnRows) + ")");
    w_.line("const bool zc_on = zc_rb + threadIdx.x < " + work + ";");
    w_.line("const idx_t zc_row = zc_on ? zc_rb + threadIdx.x : " + work + " - 1;");
  } else {
    // Partial results of 32 warps, of the widest accumulator (a double with its position).
    w_.line("__shared__ __align__(16) unsigned char zc_smem[32 * 16];");
    w_.open("for (idx_t zc_row = blockIdx.x; zc_row < " + work + "; zc_row += gridDim.x)");
  }
  return decompose(outer, "zc_row", "i");
}

void KernelEmitter::declare_accumulator(const Reduction& r) {
  if (r.op == OpId::sum) {
    w_.line(sum_type(r.type) + " " + r.acc + " = 0;");
    return;
  }
  const std::string T = pick_type(r.type);
  w_.line("ZcPick<" + T + "> " + r.acc + "{(" + T + ")0, -1};");
}

KernelEmitter::Names KernelEmitter::open_pass(const Shape& inner, const Reduction*) {
  const Launch& l = *launch_;
  // The column form's threads each take few rows' elements far apart: unrolled, a thread
  // has several loads in flight (its sum still adds them in order).
  if (l.columns) w_.line("#pragma unroll 8");
  w_.open("for (idx_t zc_j = " + std::string(l.columns ? "threadIdx.y" : "threadIdx.x") +
          "; zc_j < " + num(shape_numel(inner)) + "; zc_j += " +
          (l.columns ? std::to_string(kColumnThreads) : std::string("blockDim.x")) + ")");
  return decompose(inner, "zc_j", "r");
}

void KernelEmitter::accumulate(const Reduction& r, const std::string& x) {
  if (r.op == OpId::sum) {
    w_.line(r.acc + " += " + x + ";");
    return;
  }
  const std::string T = pick_type(r.type);
  w_.line(r.acc + " = zc_pick<" + pick_max(r.op) + ">(" + r.acc + ", ZcPick<" + T + ">{(" + T +
          ")(" + x + "), (int64_t)zc_j});");
}

std::string KernelEmitter::reduced(const Reduction& r) {
  if (r.op == OpId::sum) {
    w_.line(r.acc + " = " + (launch_->columns ? "zc_column_sum(" : "zc_block_sum(") + r.acc +
            ", (" + sum_type(r.type) + "*)zc_smem);");
    return r.acc;
  }
  w_.line(r.acc + " = zc_block_pick<" + pick_max(r.op) + ">(" + r.acc + ", (ZcPick<" +
          pick_type(r.type) + ">*)zc_smem);");
  return r.op == OpId::argmax ? r.acc + ".at" : r.acc + ".v";
}

std::string KernelEmitter::row_store_condition() const {
  return launch_->columns ? "zc_on && threadIdx.y == 0" : "threadIdx.x == 0";
}

}  // namespace zc::codegen::cuda
