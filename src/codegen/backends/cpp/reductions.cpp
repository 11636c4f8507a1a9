// Row reductions: the rows are a loop nest, shared out among threads when they are worth a
// team, and each reduction of a row is a pass over its elements in a block of its own.
#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"

namespace zc::codegen::cpp {

using ir::ValueId;
using ops::OpId;

void KernelEmitter::emit_row_reduce(const Kernel& k) {
  const Shape& S = k.space;
  Shape outer = S, inner(S.size(), 1);
  for (int64_t d : k.reduce_dims) {
    outer[d] = 1;
    inner[d] = S[d];
  }
  if (shape_numel(outer) == 0) return;
  // Rows are shared out, every row loop of them (a row's own loops run on one thread), when
  // all rows together are worth a thread team.
  int outer_opened = 0;
  Names row = open_loops(outer, "i", Share::all, &outer_opened, s_.varies(k), shape_numel(inner));
  // Row values are named by the kept dims only, with or without the reduced dims as 1.
  const RowIndex rows = row_index(k, row);
  auto row_names = [&](ValueId v) { return rows.of(s_.graph.meta(v).shape); };
  // Opens the reduced loops, preceded by `simd` (an `omp simd` pragma) if any, and returns the
  // full index names.
  auto open_inner = [&](int* opened, const std::string& simd) {
    // A block of its own, so element values of one pass never collide with another pass's,
    // also when the reduced dims have size 1 and no loop is opened.
    w_.open("");
    int loops = 0;
    for (int64_t d : inner) loops += d > 1;
    if (loops > 0 && !simd.empty()) {
      w_.line(simd + (loops > 1 ? " collapse(" + std::to_string(loops) + ")" : ""));
    }
    Names in = open_loops(inner, "r", Share::none, opened);
    ++*opened;
    Names full = row;
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
    std::string ct = compute_type(it), acc = "acc" + std::to_string(o);
    const bool extremum = n.op == OpId::amax || n.op == OpId::amin;
    std::string simd;
    if (n.op == OpId::sum) {
      // Floating sums accumulate in double, integer sums in int64, as the eager kernel does;
      // `omp simd` lets the compiler keep one partial sum per vector lane.
      w_.line(std::string(is_floating(it) ? "double " : "int64_t ") + acc + " = 0;");
      simd = "#pragma omp simd reduction(+:" + acc + ")";
    } else if (extremum && is_floating(it)) {
      // A NaN anywhere makes the result NaN, as in torch: kept as a flag beside a max (min)
      // that ignores NaNs, so that both vectorize. A second flag says whether every element
      // was the start value (-inf for a max): Clang starts OpenMP's max reduction from the
      // lowest finite float (GCC from -inf), which a row of -infs then gave as its max.
      const bool mx = n.op == OpId::amax;
      const std::string id = std::to_string(o);
      w_.line(ct + " " + acc + " = " + (mx ? "-" : "") + "INFINITY;");
      w_.line("int nan" + id + " = 0, inf" + id + " = 1;");
      simd = std::string("#pragma omp simd reduction(") + (mx ? "max" : "min") + ":" + acc +
             ") reduction(|:nan" + id + ") reduction(&:inf" + id + ")";
    } else {
      w_.line(ct + " " + acc + " = 0;");
      w_.line("int64_t pos" + std::to_string(o) + " = 0, at" + std::to_string(o) + " = 0;");
    }
    int opened = 0;
    Names full = open_inner(&opened, simd);
    emit_elements({in}, full);
    std::string x = operand(in, S, full), p = "pos" + std::to_string(o),
                at = "at" + std::to_string(o);
    if (n.op == OpId::sum) {
      w_.line(acc + " += " + x + ";");
    } else if (extremum && is_floating(it)) {
      std::string nan = "nan" + std::to_string(o);
      w_.line(ct + " x = " + x + ";");
      w_.line(nan + " |= x != x;");
      w_.line("inf" + std::to_string(o) + " &= x == " + (n.op == OpId::amax ? "-" : "") +
              "INFINITY;");
      w_.line(acc + " = x " + (n.op == OpId::amax ? ">" : "<") + " " + acc + " ? x : " + acc + ";");
    } else {
      w_.line(ct + " x = " + x + ";");
      // The first element starts the accumulator; a NaN wins and stays, as in torch.
      std::string better = n.op == OpId::amin ? "x < " + acc : "x > " + acc;
      w_.open("if (" + p + " == 0 || (" + acc + " == " + acc + " && (x != x || " + better + ")))");
      w_.line(acc + " = x;");
      w_.line(at + " = " + p + ";");
      w_.close();
      w_.line("++" + p + ";");
    }
    close_loops(opened);
    if (extremum && is_floating(it)) {
      w_.line("if (inf" + std::to_string(o) + ") " + acc + " = " + (n.op == OpId::amax ? "-" : "") +
              "INFINITY;");
      w_.line("if (nan" + std::to_string(o) + ") " + acc + " = NAN;");
    }
    std::string result = n.op == OpId::argmax ? at : acc;
    w_.line(compute_type(ot) + " v" + std::to_string(o) + " = (" + compute_type(ot) + ")" + result +
            ";");
  }
  // Stores: element values in one more pass over the row, row values once per row.
  std::vector<ValueId> element_stores, row_stores;
  for (ValueId v : k.stores) (s_.at(v).row_level ? row_stores : element_stores).push_back(v);
  if (!element_stores.empty()) {
    int opened = 0;
    Names full = open_inner(&opened, "");
    emit_elements(element_stores, full);
    for (ValueId v : element_stores) w_.line(store(v, full, "v" + std::to_string(v)));
    close_loops(opened);
  }
  for (ValueId v : row_stores) w_.line(store(v, row_names(v), "v" + std::to_string(v)));
  close_loops(outer_opened);
}

}  // namespace zc::codegen::cpp
