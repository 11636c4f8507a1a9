// Loop-nest kernels: pointwise, copy and gather, and the element loops of concatenations.
#include "codegen/backends/cpp/abi.h"
#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/c_expr.h"

namespace zc::codegen::cpp {

using ir::ValueId;

void KernelEmitter::emit_pointwise(const Kernel& k) {
  if (shape_numel(k.space) == 0) return;
  int opened = 0;
  Names names = open_loops(k.space, "i", Share::outer, &opened, s_.varies(k));
  for (int32_t n : k.nodes) emit_node(n, names);
  for (ValueId v : k.stores) w_.line(store(v, names, "v" + std::to_string(v)));
  close_loops(opened);
}

void KernelEmitter::emit_copy(const Kernel& k) {
  const Shape& shape = s_.graph.meta(k.copy_from).shape;
  if (shape_numel(shape) == 0) return;
  int opened = 0;
  Names names = open_loops(shape, "i", Share::outer, &opened, varies(k.copy_from));
  // Row-major position in the source is the position in the dense destination.
  Shape dense = contiguous_strides(shape);
  std::string lin = "0";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (names[d] != "0") lin += " + " + names[d] + " * " + num(dense[d]);
  }
  DType t = s_.graph.meta(k.copy_to).dtype;
  std::string dst = buffer(s_.at(k.copy_to).view.base);
  w_.line(dst + "[" + lin + "] = " + to_storage(t, load(k.copy_from, names)) + ";");
  close_loops(opened);
}

KernelEmitter::Names KernelEmitter::open_elements(const Shape& shape, bool varies) {
  w_.open("");
  int opened = 0;
  Names names = open_loops(shape, "i", Share::outer, &opened, varies);
  scopes_.push_back(opened + 1);
  return names;
}

void KernelEmitter::emit_gather(const Kernel& k) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  ValueId table = n.inputs[0], idx = n.inputs[1], out = n.outputs[0];
  const Shape& ts = s_.graph.meta(table).shape;
  const Shape& is = s_.graph.meta(idx).shape;
  if (shape_numel(is) == 0) return;
  int opened = 0;
  Names names = open_loops(is, "i", Share::none, &opened);
  w_.line("int64_t t = (int64_t)" + load(idx, names) + ";");
  // The eager kernel raises for a bad index; generated code reports it to the runtime.
  w_.line("if (t < 0 || t >= " + num(ts[0]) + ") return " + std::to_string(kErrIndexOutOfRange) +
          ";");
  w_.open("for (int64_t d = 0; d < " + num(ts[1]) + "; ++d)");
  Names dst = names;
  dst.push_back("d");
  w_.line(store(out, dst, load(table, {"t", "d"})));
  w_.close();
  close_loops(opened);
}

}  // namespace zc::codegen::cpp