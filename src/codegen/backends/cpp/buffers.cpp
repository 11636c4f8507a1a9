// How a C++ kernel reaches its buffers: through the ZcArgs its caller passes.
#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/c_expr.h"

namespace zc::codegen::cpp {

using ir::ValueId;

std::string KernelEmitter::buffer(ValueId base) const {
  const BufferPlan::Slot& slot = plan_.slot[base];
  std::string T = storage_type(s_.graph.meta(base).dtype);
  std::string i = std::to_string(slot.index);
  std::string name, init;
  switch (slot.kind) {
    case BufferKind::input:
      name = "in" + i;
      init = "const " + T + "* __restrict " + name + " = (const " + T + "*)a->in[" + i + "];";
      break;
    case BufferKind::output:
      name = "out" + i;
      init = T + "* __restrict " + name + " = (" + T + "*)a->out[" + i + "];";
      break;
    case BufferKind::constant:
      name = "c" + i;
      init = "const " + T + "* __restrict " + name + " = (const " + T + "*)a->consts[" + i + "];";
      break;
    case BufferKind::arena:
      // Code for many sizes finds its arena places in a table made per size: the planner's
      // reuse of space depends on the sizes, so the places are no polynomials of them.
      name = s_.symbolic() ? "ar_v" + std::to_string(base) : "ar" + i;
      init = T + "* __restrict " + name + " = (" + T + "*)(a->arena + " +
             (s_.symbolic() ? "a->places[" + std::to_string(base) + "]" : i) + ");";
      break;
  }
  for (const auto& [n, d] : locals_) {
    if (n == name) return name;
  }
  locals_.emplace_back(name, init);
  return name;
}

}  // namespace zc::codegen::cpp
