// Grid-stride kernels: pointwise (with vector steps where the operands allow), copy and gather,
// and the element loops of concatenations.
#include <algorithm>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"

namespace zc::codegen::cuda {

using ir::ValueId;

void KernelEmitter::emit_pointwise(const Kernel& k, const Launch& l) {
  if (shape_numel(k.space) == 0) return;
  emit_elementwise_loops(k, l, -1);
}

void KernelEmitter::emit_elementwise_loops(const Kernel& k, const Launch& l, ValueId skip) {
  if (l.vector > 1) {
    // Every pointer a vector step reads or writes, 16-byte aligned (the caching allocator's
    // blocks and the arena's slots are; an input that is a view into a tensor may not be).
    std::string ptrs;
    std::vector<ValueId> bases;
    for (ValueId u : vector_loads(s_, kernel_)) bases.push_back(s_.base_of(u));
    for (ValueId v : k.stores) {
      if (v != skip) bases.push_back(s_.base_of(v));
    }
    std::sort(bases.begin(), bases.end());
    bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
    for (ValueId b : bases)
      ptrs += std::string(ptrs.empty() ? "" : " | ") + "(unsigned long long)" + buffer(b);
    w_.open("if (((" + (ptrs.empty() ? std::string("0") : ptrs) + ") & 15) == 0)");
    emit_vector_loop(k, l, skip);
    w_.close();
    w_.open("else");
  }
  open_grid_loop(shape_numel(k.space));
  Names names = decompose(k.space, "zc_i", "i");
  for (int32_t node : k.nodes) {
    if (node != k.anchor) emit_node(node, names);
  }
  for (ValueId v : k.stores) {
    if (v != skip) w_.line(store(v, names, "v" + std::to_string(v)));
  }
  w_.close();
  if (l.vector > 1) w_.close();
}

std::string raw_vector_type(size_t bytes) {
  switch (bytes) {
    case 16:
      return "uint4";
    case 8:
      return "uint2";
    case 4:
      return "unsigned int";
    case 2:
      return "unsigned short";
    default:
      return "unsigned char";
  }
}

// Each thread takes `width` consecutive elements per step, all in one row of the last dim:
// dense operands arrive in one load each into a staging array, the member nodes run once per
// lane (unrolled), and each store leaves in one store from its staging array.
void KernelEmitter::emit_vector_loop(const Kernel& k, const Launch& l, ValueId skip) {
  const std::string width = std::to_string(l.vector);
  w_.open("for (idx_t zc_v = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; zc_v < " +
          num(shape_numel(k.space) / l.vector) + "; zc_v += (idx_t)gridDim.x * blockDim.x)");
  w_.line("const idx_t zc_i = zc_v * " + width + ";");
  Names names = decompose(k.space, "zc_i", "i");
  auto vector_access = [&](ValueId u, const std::string& array, bool load_it) {
    const DType t = s_.graph.meta(s_.base_of(u)).dtype;
    const std::string raw = raw_vector_type(dtype_size(t) * l.vector);
    const std::string ref = "&" + element_ref(u, broadcast(s_.graph.meta(u).shape, k.space, names));
    if (load_it) {
      w_.line("__align__(16) " + storage_type(t) + " " + array + "[" + width + "];");
      w_.line("*reinterpret_cast<" + raw + "*>(" + array + ") = *reinterpret_cast<const " + raw +
              "*>(" + ref + ");");
    } else {
      w_.line("*reinterpret_cast<" + raw + "*>(" + ref + ") = *reinterpret_cast<const " + raw +
              "*>(" + array + ");");
    }
  };
  Names lane = names;
  lane.back() = "(" + names.back() + " + zc_j)";
  staged_.clear();
  for (ValueId u : vector_loads(s_, kernel_)) {
    const std::string array = "zc_x" + std::to_string(u);
    vector_access(u, array, true);
    staged_.emplace_back(u, from_storage(s_.graph.meta(s_.base_of(u)).dtype, array + "[zc_j]"));
  }
  for (ValueId v : k.stores) {
    if (v != skip) {
      w_.line("__align__(16) " + storage_type(s_.graph.meta(v).dtype) + " zc_y" +
              std::to_string(v) + "[" + width + "];");
    }
  }
  w_.line("#pragma unroll");
  w_.open("for (int zc_j = 0; zc_j < " + width + "; ++zc_j)");
  for (int32_t node : k.nodes) {
    if (node != k.anchor) emit_node(node, lane);
  }
  for (ValueId v : k.stores) {
    if (v != skip) {
      w_.line("zc_y" + std::to_string(v) +
              "[zc_j] = " + to_storage(s_.graph.meta(v).dtype, "v" + std::to_string(v)) + ";");
    }
  }
  w_.close();
  staged_.clear();
  for (ValueId v : k.stores) {
    if (v != skip) vector_access(v, "zc_y" + std::to_string(v), false);
  }
  w_.close();
}

void KernelEmitter::emit_copy(const Kernel& k, const Launch&) {
  const Shape& shape = s_.graph.meta(k.copy_from).shape;
  if (shape_numel(shape) == 0) return;
  open_grid_loop(shape_numel(shape));
  Names names = decompose(shape, "zc_i", "i");
  // Row-major position in the source is the position in the dense destination.
  DType t = s_.graph.meta(k.copy_to).dtype;
  w_.line(buffer(s_.at(k.copy_to).view.base) +
          "[zc_i] = " + to_storage(t, load(k.copy_from, names)) + ";");
  w_.close();
}

// A grid-stride loop decides nothing by size (the C++ backend's threads do), so it is the same
// whether the sizes vary or not.
KernelEmitter::Names KernelEmitter::open_elements(const Shape& shape, bool) {
  open_grid_loop(shape_numel(shape));
  return decompose(shape, "zc_i", "i");
}

void KernelEmitter::emit_gather(const Kernel& k, const Launch&) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  ValueId table = n.inputs[0], idx = n.inputs[1], out = n.outputs[0];
  const Shape& ts = s_.graph.meta(table).shape;
  const Shape& os = s_.graph.meta(out).shape;
  if (shape_numel(os) == 0) return;
  open_grid_loop(shape_numel(os));
  Names names = decompose(os, "zc_i", "i");
  Names at(names.begin(), names.end() - 1);
  std::string d = names.back();
  w_.line("const int64_t t = (int64_t)" + load(idx, at) + ";");
  // The eager kernel raises for a bad index; generated code flags it for the runtime.
  w_.open("if (t < 0 || t >= " + num(ts[0]) + ")");
  w_.line("atomicExch(zc_err, 1);");
  w_.line("continue;");
  w_.close();
  w_.line(store(out, names, load(table, {"t", d})));
  w_.close();
}

}  // namespace zc::codegen::cuda
