// Loop-nest kernels: pointwise, row_reduce, copy, concat and gather.
#include <algorithm>

#include "codegen/backends/cpp/abi.h"
#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"
#include "util/check.h"

namespace zc::codegen::cpp {

using ir::ValueId;
using ops::OpId;

void KernelEmitter::emit(int32_t k, const std::string& name) {
  kernel_ = k;
  library_output_ = -1;
  locals_.clear();
  w_ = CodeWriter(1);
  const Kernel& K = s_.kernels[k];
  switch (K.kind) {
    case KernelKind::pointwise:
      emit_pointwise(K);
      break;
    case KernelKind::row_reduce:
      emit_row_reduce(K);
      break;
    case KernelKind::matmul:
      emit_matmul(K);
      break;
    case KernelKind::copy:
      emit_copy(K);
      break;
    case KernelKind::concat:
      emit_concat(K);
      break;
    case KernelKind::gather:
      emit_gather(K);
      break;
    case KernelKind::extern_op:
      ZC_CHECK(false, "extern kernels are not generated");
  }
  w_.line("return 0;");
  out_.open("extern \"C\" int " + name + "(const ZcArgs* a)");
  for (const auto& [n, decl] : locals_) out_.line(decl);
  out_.raw(w_.str());
  out_.close();
  out_.blank();
}

KernelEmitter::Names KernelEmitter::open_loops(const Shape& shape, const std::string& prefix,
                                               bool parallel_ok, int* opened) {
  Names names(shape.size(), "0");
  int loops = 0;
  for (int64_t d : shape) loops += d > 1;
  if (parallel_ok && loops > 0 && shape_numel(shape) >= opt_.parallel_threshold) {
    // All but the innermost loop are shared out; the innermost stays whole to vectorize.
    w_.line(loops > 1 ? "#pragma omp parallel for collapse(" + std::to_string(loops - 1) + ")"
                      : "#pragma omp parallel for");
  }
  *opened = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 1) continue;
    names[d] = prefix + std::to_string(d);
    w_.open("for (int64_t " + names[d] + " = 0; " + names[d] + " < " + std::to_string(shape[d]) +
            "; ++" + names[d] + ")");
    ++*opened;
  }
  return names;
}

void KernelEmitter::close_loops(int opened) {
  for (int i = 0; i < opened; ++i) w_.close();
}

void KernelEmitter::emit_pointwise(const Kernel& k) {
  if (shape_numel(k.space) == 0) return;
  int opened = 0;
  Names names = open_loops(k.space, "i", true, &opened);
  for (int32_t n : k.nodes) emit_node(n, names);
  for (ValueId v : k.stores) w_.line(store(v, names, "v" + std::to_string(v)));
  close_loops(opened);
}

void KernelEmitter::emit_row_reduce(const Kernel& k) {
  const Shape& S = k.space;
  Shape outer = S, inner(S.size(), 1);
  for (int64_t d : k.reduce_dims) {
    outer[d] = 1;
    inner[d] = S[d];
  }
  if (shape_numel(outer) == 0) return;
  int outer_opened = 0;
  Names row = open_loops(outer, "i", true, &outer_opened);
  // Row values are named by the kept dims only, with or without the reduced dims as 1.
  const RowIndex rows = row_index(k, row);
  auto row_names = [&](ValueId v) { return rows.of(s_.graph.meta(v).shape); };
  // Opens the reduced loops and returns the full index names.
  auto open_inner = [&](int* opened) {
    // A block of its own, so element values of one pass never collide with another pass's,
    // also when the reduced dims have size 1 and no loop is opened.
    w_.open("");
    Names in = open_loops(inner, "r", false, opened);
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
    if (n.op == OpId::sum) {
      // Floating sums accumulate in double, integer sums in int64, as the eager kernel does.
      w_.line(std::string(is_floating(it) ? "double " : "int64_t ") + acc + " = 0;");
    } else {
      w_.line(ct + " " + acc + " = 0;");
      w_.line("int64_t pos" + std::to_string(o) + " = 0, at" + std::to_string(o) + " = 0;");
    }
    int opened = 0;
    Names full = open_inner(&opened);
    emit_elements({in}, full);
    std::string x = operand(in, S, full), p = "pos" + std::to_string(o),
                at = "at" + std::to_string(o);
    if (n.op == OpId::sum) {
      w_.line(acc + " += " + x + ";");
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
    std::string result = n.op == OpId::argmax ? at : acc;
    w_.line(compute_type(ot) + " v" + std::to_string(o) + " = (" + compute_type(ot) + ")" + result +
            ";");
  }
  // Stores: element values in one more pass over the row, row values once per row.
  std::vector<ValueId> element_stores, row_stores;
  for (ValueId v : k.stores) (s_.at(v).row_level ? row_stores : element_stores).push_back(v);
  if (!element_stores.empty()) {
    int opened = 0;
    Names full = open_inner(&opened);
    emit_elements(element_stores, full);
    for (ValueId v : element_stores) w_.line(store(v, full, "v" + std::to_string(v)));
    close_loops(opened);
  }
  for (ValueId v : row_stores) w_.line(store(v, row_names(v), "v" + std::to_string(v)));
  close_loops(outer_opened);
}

void KernelEmitter::emit_copy(const Kernel& k) {
  const Shape& shape = s_.graph.meta(k.copy_from).shape;
  if (shape_numel(shape) == 0) return;
  int opened = 0;
  Names names = open_loops(shape, "i", true, &opened);
  // Row-major position in the source is the position in the dense destination.
  Shape dense = contiguous_strides(shape);
  std::string lin = "0";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (names[d] != "0") lin += " + " + names[d] + " * " + std::to_string(dense[d]);
  }
  DType t = s_.graph.meta(k.copy_to).dtype;
  std::string dst = buffer(s_.at(k.copy_to).view.base);
  w_.line(dst + "[" + lin + "] = " + to_storage(t, load(k.copy_from, names)) + ";");
  close_loops(opened);
}

void KernelEmitter::emit_concat(const Kernel& k) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  ValueId out = n.outputs[0];
  int64_t dim = std::get<ops::DimAttrs>(n.attrs).dim;
  int64_t shift = 0;
  for (ValueId u : n.inputs) {
    const Shape& shape = s_.graph.meta(u).shape;
    if (shape_numel(shape) > 0) {
      w_.open("");
      int opened = 0;
      Names names = open_loops(shape, "i", true, &opened);
      w_.line(concat_store(out, u, names, dim, shift));
      close_loops(opened);
      w_.close();
    }
    shift += shape[dim];
  }
}

void KernelEmitter::emit_gather(const Kernel& k) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  ValueId table = n.inputs[0], idx = n.inputs[1], out = n.outputs[0];
  const Shape& ts = s_.graph.meta(table).shape;
  const Shape& is = s_.graph.meta(idx).shape;
  if (shape_numel(is) == 0) return;
  int opened = 0;
  Names names = open_loops(is, "i", false, &opened);
  w_.line("int64_t t = (int64_t)" + load(idx, names) + ";");
  // The eager kernel raises for a bad index; generated code reports it to the runtime.
  w_.line("if (t < 0 || t >= " + std::to_string(ts[0]) + ") return " +
          std::to_string(kErrIndexOutOfRange) + ";");
  w_.open("for (int64_t d = 0; d < " + std::to_string(ts[1]) + "; ++d)");
  Names dst = names;
  dst.push_back("d");
  w_.line(store(out, dst, load(table, {"t", "d"})));
  w_.close();
  close_loops(opened);
}

}  // namespace zc::codegen::cpp
