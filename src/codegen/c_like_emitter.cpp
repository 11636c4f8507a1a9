#include "codegen/c_like_emitter.h"

#include <algorithm>
#include <set>

#include "codegen/c_expr.h"
#include "ops/registry.h"
#include "tensor/element.h"
#include "util/check.h"

namespace zc::codegen {

using ir::ValueId;

bool in_kernel_register(const Schedule& s, int32_t k, ValueId u, ValueId library_output) {
  return s.at(u).kernel == k && u != library_output && s.at(u).state != ValueState::alias;
}

bool read_as_literal(const Schedule& s, ValueId u) {
  return s.at(u).state == ValueState::constant && shape_numel(s.graph.meta(u).shape) == 1;
}

bool CLikeEmitter::in_register(ValueId u) const {
  return in_kernel_register(s_, kernel_, u, library_output_);
}

std::string CLikeEmitter::element_ref(ValueId u, const Names& idx) const {
  const ValueView& v = s_.at(u).view;
  ZC_CHECK(v.base >= 0, "value %" << u << " is not materialized");
  ZC_CHECK(idx.size() == v.strides.size(), "index rank mismatch for %" << u);
  std::string off = num(v.offset);
  for (size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] == "0" || v.strides[j] == 0) continue;
    off += " + " + idx[j] + (v.strides[j] == 1 ? "" : " * " + num(v.strides[j]));
  }
  return buffer(v.base) + "[" + off + "]";
}

std::string CLikeEmitter::load(ValueId u, const Names& idx) const {
  const DType t = s_.graph.meta(u).dtype, stored = s_.graph.meta(s_.base_of(u)).dtype;
  const std::string e = from_storage(stored, element_ref(u, idx));
  // A converting alias (kernel_ir.h) reads its base's dtype and converts.
  return t == stored ? e : "(" + compute_type(t) + ")(" + e + ")";
}

std::string CLikeEmitter::store(ValueId v, const Names& idx, const std::string& reg) const {
  return element_ref(v, idx) + " = " + to_storage(s_.graph.meta(v).dtype, reg) + ";";
}

std::string CLikeEmitter::row_major_index(const Shape& shape, const Names& names) const {
  const size_t off = names.size() - shape.size();
  std::string e = "(int64_t)0";
  int64_t stride = 1;
  for (size_t j = shape.size(); j-- > 0;) {
    const std::string& i = names[j + off];
    if (shape[j] != 1 && i != "0")
      e += " + (int64_t)" + i + (stride == 1 ? "" : " * " + num(stride));
    stride *= shape[j];
  }
  return "(" + e + ")";
}

CLikeEmitter::Names CLikeEmitter::broadcast(const Shape& from, const Shape& to,
                                            const Names& names) {
  Names out(from.size(), "0");
  size_t off = to.size() - from.size();
  for (size_t j = 0; j < from.size(); ++j) {
    if (from[j] != 1) out[j] = names[j + off];
  }
  return out;
}

std::string CLikeEmitter::operand(ValueId u, const Shape& out, const Names& names) const {
  if (in_register(u)) return "v" + std::to_string(u);
  for (const auto& [value, expr] : staged_) {
    if (value == u) return expr;
  }
  const ops::TensorMeta& m = s_.graph.meta(u);
  if (read_as_literal(s_, u)) {
    for (const ir::Constant& c : s_.graph.constants) {
      if (c.value == u) return literal(load_as_double(c.data.raw_data(), m.dtype), m.dtype);
    }
  }
  return load(u, broadcast(m.shape, out, names));
}

void CLikeEmitter::emit_node(int32_t idx, const Names& names) {
  const ir::Node& n = s_.graph.nodes[idx];
  const Shape& out = s_.graph.meta(n.outputs[0]).shape;
  std::vector<std::string> in;
  for (ValueId u : n.inputs) in.push_back(operand(u, out, names));
  if (ops::op_def(n.op).reads_element_index) in.push_back(row_major_index(out, names));
  for (const std::string& line : node_lines(s_.graph, n, in, "v" + std::to_string(n.outputs[0])))
    w_.line(line);
}

std::vector<int32_t> CLikeEmitter::element_closure(const std::vector<ValueId>& targets) const {
  std::set<int32_t> need;
  std::vector<ValueId> stack = targets;
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    const ValueSchedule& r = s_.at(v);
    if (r.kernel != kernel_ || r.row_level || r.state == ValueState::alias) continue;
    int32_t p = s_.graph.values[v].producer;
    if (p < 0 || !need.insert(p).second) continue;
    for (ValueId u : s_.graph.nodes[p].inputs) stack.push_back(u);
  }
  return std::vector<int32_t>(need.begin(), need.end());
}

CLikeEmitter::RowIndex CLikeEmitter::row_index(const Kernel& k, const Names& row) {
  RowIndex r;
  for (size_t d = 0; d < k.space.size(); ++d) {
    bool reduced = std::find(k.reduce_dims.begin(), k.reduce_dims.end(), static_cast<int64_t>(d)) !=
                   k.reduce_dims.end();
    r.keep_shape.push_back(reduced ? 1 : k.space[d]);
    r.keep.push_back(reduced ? "0" : row[d]);
    if (!reduced) {
      r.squeezed_shape.push_back(k.space[d]);
      r.squeezed.push_back(row[d]);
    }
  }
  return r;
}

CLikeEmitter::MatmulIndex CLikeEmitter::matmul_index(const Shape& a, const Shape& b) {
  MatmulIndex m{ops::matmul_shapes(a, b), {}, {}};
  m.a_batch.assign(a.begin(), a.end() - (m.d.a_vec ? 1 : 2));
  m.b_batch.assign(b.begin(), b.end() - (m.d.b_vec ? 1 : 2));
  return m;
}

CLikeEmitter::Names CLikeEmitter::MatmulIndex::c(const Names& batch, const std::string& i,
                                                 const std::string& j) const {
  Names out = batch;
  if (!d.a_vec) out.push_back(i);
  if (!d.b_vec) out.push_back(j);
  return out;
}

CLikeEmitter::Names CLikeEmitter::MatmulIndex::a(const Names& batch, const std::string& i,
                                                 const std::string& k) const {
  Names out = broadcast(a_batch, d.batch, batch);
  if (!d.a_vec) out.push_back(i);
  out.push_back(k);
  return out;
}

CLikeEmitter::Names CLikeEmitter::MatmulIndex::b(const Names& batch, const std::string& k,
                                                 const std::string& j) const {
  Names out = broadcast(b_batch, d.batch, batch);
  out.push_back(k);
  if (!d.b_vec) out.push_back(j);
  return out;
}

void CLikeEmitter::emit_row_reduce(const Kernel& k) {
  Shape outer = k.space, inner(k.space.size(), 1);
  for (int64_t d : k.reduce_dims) {
    outer[d] = 1;
    inner[d] = k.space[d];
  }
  const std::optional<Names> row = open_rows(k, outer, inner);
  if (!row) return;
  // Row values are named by the kept dims only, with or without the reduced dims as 1.
  const RowIndex rows = row_index(k, *row);
  auto row_names = [&](ValueId v) { return rows.of(s_.graph.meta(v).shape); };
  // A pass's index names: the row's, and the pass's own for the reduced dims.
  auto open_row_pass = [&](const Reduction* r) {
    const Names in = open_pass(inner, r);
    Names full = *row;
    for (int64_t d : k.reduce_dims) full[d] = in[d];
    return full;
  };
  auto emit_elements = [&](const std::vector<ValueId>& targets, const Names& full) {
    for (int32_t n : element_closure(targets)) emit_node(n, full);
  };

  for (int32_t idx : k.nodes) {
    const ir::Node& n = s_.graph.nodes[idx];
    const ValueId o = n.outputs[0];
    if (!s_.at(o).row_level) continue;  // element values are computed where they are used
    if (!ops::is_primitive_reduction(n.op)) {
      emit_node(idx, row_names(o));
      continue;
    }
    const Reduction r{n.op, n.inputs[0], o, s_.graph.meta(n.inputs[0]).dtype,
                      "acc" + std::to_string(o)};
    declare_accumulator(r);
    const Names full = open_row_pass(&r);
    emit_elements({r.in}, full);
    accumulate(r, operand(r.in, k.space, full));
    close_pass();
    const std::string result = reduced(r);
    const std::string ct = compute_type(s_.graph.meta(o).dtype);
    w_.line(ct + " v" + std::to_string(o) + " = (" + ct + ")" + result + ";");
  }
  // Stores: element values in one more pass over the row, row values once per row.
  std::vector<ValueId> element_stores, row_stores;
  for (ValueId v : k.stores) (s_.at(v).row_level ? row_stores : element_stores).push_back(v);
  if (!element_stores.empty()) {
    const Names full = open_row_pass(nullptr);
    emit_elements(element_stores, full);
    for (ValueId v : element_stores) w_.line(store(v, full, "v" + std::to_string(v)));
    close_pass();
  }
  if (!row_stores.empty()) {
    const std::string only = row_store_condition();
    if (!only.empty()) w_.open("if (" + only + ")");
    for (ValueId v : row_stores) w_.line(store(v, row_names(v), "v" + std::to_string(v)));
    if (!only.empty()) w_.close();
  }
  close_rows();
}

void CLikeEmitter::emit_concat(const Kernel& k) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  const ValueId out = n.outputs[0];
  const int64_t dim = std::get<ops::DimAttrs>(n.attrs).dim;
  int64_t shift = 0;
  for (ValueId u : n.inputs) {
    const Shape& shape = s_.graph.meta(u).shape;
    if (shape_numel(shape) > 0) {
      const Names names = open_elements(shape, varies(u));
      Names dst = names;
      dst[dim] = "(" + names[dim] + " + " + num(shift) + ")";
      w_.line(store(out, dst,
                    "(" + compute_type(s_.graph.meta(out).dtype) + ")(" + load(u, names) + ")"));
      close_elements();
    }
    shift += shape[dim];
  }
}

CLikeEmitter::Names CLikeEmitter::AttentionOperands::names(const Shape& operand, const Names& b,
                                                           const std::string& row,
                                                           const std::string& col) const {
  Names out = broadcast(Shape(operand.begin(), operand.end() - 2), batch, b);
  out.push_back(row);
  out.push_back(col);
  return out;
}

CLikeEmitter::Names CLikeEmitter::AttentionOperands::mask_names(const Names& b,
                                                                const std::string& row,
                                                                const std::string& col) const {
  const size_t r = ms.size();
  return names(ms, b, ms[r - 2] == 1 ? "0" : row, ms[r - 1] == 1 ? "0" : col);
}

CLikeEmitter::Names CLikeEmitter::AttentionOperands::row_names(const Shape& operand, const Names& b,
                                                               const std::string& row) const {
  Names out = broadcast(Shape(operand.begin(), operand.end() - 1), batch, b);
  out.push_back(row);
  return out;
}

void CLikeEmitter::apply_attention_mask(const AttentionOperands& at, const Names& b,
                                        const std::string& row, const std::string& col,
                                        const std::string& T, std::string& seen,
                                        std::string& score) const {
  if (at.M < 0) return;
  const std::string m = load(at.M, at.mask_names(b, row, col));
  if (at.mask_keeps) {
    seen += " && " + m;
  } else {
    score += " + (" + T + ")" + m;
  }
}

CLikeEmitter::AttentionOperands CLikeEmitter::attention_operands(const Kernel& k) const {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  AttentionOperands at{.op = n.op, .Q = n.inputs[0], .K = n.inputs[1], .O = n.outputs[0]};
  if (n.op == ops::OpId::attention_grad) {
    const auto& a = std::get<ops::AttentionGradAttrs>(n.attrs);
    at.a = ops::AttentionAttrs{a.causal, a.scale};
    at.wrt = a.wrt;
    at.G = n.inputs[3];
    at.LSE = n.inputs[4];
    at.DELTA = n.inputs[5];
    at.gs = s_.graph.meta(at.G).shape;
  } else {
    at.a = std::get<ops::AttentionAttrs>(n.attrs);
  }
  if (n.op == ops::OpId::attention && n.inputs.size() == 4) {
    at.M = n.inputs[3];
    at.ms = s_.graph.meta(at.M).shape;
    at.mask_keeps = s_.graph.meta(at.M).dtype == DType::boolean;
  }
  if (n.op != ops::OpId::attention_lse) {
    at.V = n.inputs[2];
    at.vs = s_.graph.meta(at.V).shape;
    at.dv = at.vs.back();
  }
  at.qs = s_.graph.meta(at.Q).shape;
  at.ks = s_.graph.meta(at.K).shape;
  at.os = s_.graph.meta(at.O).shape;
  at.batch = Shape(at.os.begin(), at.os.end() - (n.op == ops::OpId::attention_lse ? 1 : 2));
  at.tq = at.qs[at.qs.size() - 2];
  at.tk = at.ks[at.ks.size() - 2];
  at.d = at.qs.back();
  at.odt = s_.graph.meta(at.O).dtype;
  return at;
}

}  // namespace zc::codegen
