// Row reductions: one block per row. Each reduction of the kernel is a pass over the row's
// elements, each thread striding by the block size (computing the element values it needs on
// the way) and the block combining the threads' partial results; row-level values then live in
// every thread's registers, element-level stores make one more pass, row-level stores are
// written by thread 0. In the column form (launch.h) a block takes kColumnRows rows along x,
// and the threads along y share a row: the same passes, striding by blockDim.y, and the
// partial results combined per row. Floating sums accumulate in double and integer ones in int64,
// as the eager kernels do.
#include <algorithm>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "util/check.h"

namespace zc::codegen::cuda {

using ir::ValueId;
using ops::OpId;

void KernelEmitter::emit_row_reduce(const Kernel& k, const Launch& l) {
  const Shape& S = k.space;
  Shape outer = S, inner(S.size(), 1);
  int64_t row = 1;
  for (int64_t d : k.reduce_dims) {
    outer[d] = 1;
    inner[d] = S[d];
    row *= S[d];
  }
  if (l.work == 0) return;
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
  Names rowv = decompose(outer, "zc_row", "i");
  const RowIndex rows = row_index(k, rowv);
  auto row_names = [&](ValueId v) { return rows.of(s_.graph.meta(v).shape); };
  const std::string thread = l.columns ? "threadIdx.y" : "threadIdx.x";
  // Opens a pass over the row's elements; returns the full index names.
  auto open_pass = [&] {
    // The column form's threads each take few rows' elements far apart: unrolled, a thread
    // has several loads in flight (its sum still adds them in order).
    if (l.columns) w_.line("#pragma unroll 8");
    w_.open("for (idx_t zc_j = " + thread + "; zc_j < " + num(row) + "; zc_j += " +
            (l.columns ? std::to_string(kColumnThreads) : std::string("blockDim.x")) + ")");
    Names in = decompose(inner, "zc_j", "r");
    Names full = rowv;
    for (int64_t d : k.reduce_dims) full[d] = in[d];
    return full;
  };
  auto emit_elements = [&](const std::vector<ValueId>& targets, const Names& full) {
    for (int32_t n : element_closure(targets)) emit_node(n, full);
  };

  for (int32_t idx : k.nodes) {
    const ir::Node& n = s_.graph.nodes[idx];
    ValueId o = n.outputs[0];
    if (!s_.at(o).row_level) continue;  // element values are computed where they are used
    if (!ops::is_primitive_reduction(n.op)) {
      emit_node(idx, row_names(o));
      continue;
    }
    ValueId in = n.inputs[0];
    DType it = s_.graph.meta(in).dtype, ot = s_.graph.meta(o).dtype;
    std::string acc = "acc" + std::to_string(o);
    if (n.op == OpId::sum) {
      std::string A = is_floating(it) ? "double" : "int64_t";
      w_.line(A + " " + acc + " = 0;");
      Names full = open_pass();
      emit_elements({in}, full);
      w_.line(acc + " += " + operand(in, S, full) + ";");
      w_.close();
      w_.line(acc + " = " + (l.columns ? "zc_column_sum(" : "zc_block_sum(") + acc + ", (" + A +
              "*)zc_smem);");
      w_.line(compute_type(ot) + " v" + std::to_string(o) + " = (" + compute_type(ot) + ")" + acc +
              ";");
      continue;
    }
    // amax, amin, argmax: a value and its position. Bools compare as 0 and 1 (shuffles move
    // no bools).
    std::string T = it == DType::boolean ? "int32_t" : compute_type(it);
    std::string P = "ZcPick<" + T + ">";
    std::string max = n.op == OpId::amin ? "false" : "true";
    w_.line(P + " " + acc + "{(" + T + ")0, -1};");
    Names full = open_pass();
    emit_elements({in}, full);
    w_.line(acc + " = zc_pick<" + max + ">(" + acc + ", " + P + "{(" + T + ")(" +
            operand(in, S, full) + "), (int64_t)zc_j});");
    w_.close();
    w_.line(acc + " = zc_block_pick<" + max + ">(" + acc + ", (" + P + "*)zc_smem);");
    std::string result = n.op == OpId::argmax ? acc + ".at" : acc + ".v";
    w_.line(compute_type(ot) + " v" + std::to_string(o) + " = (" + compute_type(ot) + ")" + result +
            ";");
  }
  std::vector<ValueId> element_stores, row_stores;
  for (ValueId v : k.stores) (s_.at(v).row_level ? row_stores : element_stores).push_back(v);
  if (!element_stores.empty()) {
    Names full = open_pass();
    emit_elements(element_stores, full);
    for (ValueId v : element_stores) w_.line(store(v, full, "v" + std::to_string(v)));
    w_.close();
  }
  if (!row_stores.empty()) {
    w_.open(l.columns ? "if (zc_on && threadIdx.y == 0)" : "if (threadIdx.x == 0)");
    for (ValueId v : row_stores) w_.line(store(v, row_names(v), "v" + std::to_string(v)));
    w_.close();
  }
  w_.close();
}

}  // namespace zc::codegen::cuda
