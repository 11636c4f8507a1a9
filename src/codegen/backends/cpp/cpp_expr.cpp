// Registers, loads, stores and elementwise nodes. Each node's expression comes from its op's
// registry entry (through codegen/c_expr.h) and computes in the same type and order as the op's
// eager kernel, so generated code and the interpreter agree to rounding.
#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"
#include "tensor/element.h"
#include "util/check.h"

namespace zc::codegen::cpp {

using ir::ValueId;
using ops::OpId;

bool KernelEmitter::in_register(ValueId u) const {
  return s_.at(u).kernel == kernel_ && u != blas_output_ && s_.at(u).state != ValueState::alias;
}

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
      name = "ar" + i;
      init = T + "* __restrict " + name + " = (" + T + "*)(a->arena + " + i + ");";
      break;
  }
  for (const auto& [n, d] : locals_) {
    if (n == name) return name;
  }
  locals_.emplace_back(name, init);
  return name;
}

std::string KernelEmitter::element_ref(ValueId u, const Names& idx) const {
  const ValueView& v = s_.at(u).view;
  ZC_CHECK(v.base >= 0, "value %" << u << " is not materialized");
  ZC_CHECK(idx.size() == v.strides.size(), "index rank mismatch for %" << u);
  std::string off = std::to_string(v.offset);
  for (size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] == "0" || v.strides[j] == 0) continue;
    off += " + " + idx[j] + (v.strides[j] == 1 ? "" : " * " + std::to_string(v.strides[j]));
  }
  return buffer(v.base) + "[" + off + "]";
}

std::string KernelEmitter::load(ValueId u, const Names& idx) const {
  return from_storage(s_.graph.meta(u).dtype, element_ref(u, idx));
}

std::string KernelEmitter::store(ValueId v, const Names& idx, const std::string& reg) const {
  return element_ref(v, idx) + " = " + to_storage(s_.graph.meta(v).dtype, reg) + ";";
}

KernelEmitter::Names KernelEmitter::broadcast(const Shape& from, const Shape& to,
                                              const Names& names) {
  Names out(from.size(), "0");
  size_t off = to.size() - from.size();
  for (size_t j = 0; j < from.size(); ++j) {
    if (from[j] != 1) out[j] = names[j + off];
  }
  return out;
}

std::string KernelEmitter::operand(ValueId u, const Shape& out, const Names& names) const {
  if (in_register(u)) return "v" + std::to_string(u);
  const ops::TensorMeta& m = s_.graph.meta(u);
  if (s_.at(u).state == ValueState::constant && shape_numel(m.shape) == 1) {
    for (const ir::Constant& c : s_.graph.constants) {
      if (c.value == u) return literal(load_as_double(c.data.raw_data(), m.dtype), m.dtype);
    }
  }
  return load(u, broadcast(m.shape, out, names));
}

void KernelEmitter::emit_node(int32_t idx, const Names& names) {
  const ir::Node& n = s_.graph.nodes[idx];
  const Shape& out = s_.graph.meta(n.outputs[0]).shape;
  std::vector<std::string> in;
  for (ValueId u : n.inputs) in.push_back(operand(u, out, names));
  for (const std::string& line : node_lines(s_.graph, n, in, "v" + std::to_string(n.outputs[0])))
    w_.line(line);
}

}  // namespace zc::codegen::cpp
