#include "codegen/verify_schedule.h"

#include <algorithm>

#include "util/check.h"

namespace zc::codegen {

namespace {

using ir::ValueId;

bool materialized(ValueState st) {
  return st == ValueState::stored || st == ValueState::input || st == ValueState::constant;
}

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_kernel_shape(const Schedule& s, int32_t k) {
  const Kernel& K = s.kernels[k];
  switch (K.kind) {
    case KernelKind::matmul:
    case KernelKind::concat:
    case KernelKind::gather:
    case KernelKind::attention:
    case KernelKind::extern_op:
      ZC_CHECK(K.anchor >= 0 && contains(K.nodes, K.anchor),
               "kernel " << k << " (" << kernel_kind_name(K.kind) << ") has no anchor node");
      if (K.library) {
        ir::ValueId c = s.graph.nodes[K.anchor].outputs[0];
        ZC_CHECK(s.at(c).state == ValueState::stored,
                 "kernel " << k << " sends its product to a library but does not store it");
      }
      break;
    case KernelKind::row_reduce:
      // Empty for a reduction of a 0-dim value.
      ZC_CHECK(std::is_sorted(K.reduce_dims.begin(), K.reduce_dims.end()),
               "kernel " << k << " (row_reduce) has unsorted reduce dims");
      for (int64_t d : K.reduce_dims) {
        ZC_CHECK(d >= 0 && d < static_cast<int64_t>(K.space.size()),
                 "kernel " << k << " reduces dim " << d << " of " << shape_str(K.space));
      }
      break;
    case KernelKind::copy:
      ZC_CHECK(K.copy_from >= 0 && K.copy_to >= 0 && s.at(K.copy_to).kernel == k,
               "copy kernel " << k << " does not write its destination");
      break;
    case KernelKind::pointwise:
      ZC_CHECK(!K.nodes.empty(), "pointwise kernel " << k << " has no nodes");
      break;
  }
}

// A converting alias (kernel_ir.h): f16/bf16 read as f32, by matmuls, by views that are
// aliases themselves and, when it is the cast of an input or constant, by nodes whose loads
// convert; or an int8 input or constant read as f32 by generated matmuls and such views.
void check_converting_alias(const Schedule& s, ValueId v, DType from, DType to) {
  const ir::Graph& g = s.graph;
  const bool int8 = from == DType::i8;
  ZC_CHECK((from == DType::f16 || from == DType::bf16 || int8) && to == DType::f32,
           "alias %" << v << " reads a " << dtype_name(from) << " buffer as " << dtype_name(to)
                     << ": only f16/bf16/i8 read as f32 can be a converting alias");
  for (ValueId o : g.outputs) {
    ZC_CHECK(o != v, "converting alias %" << v << " is a graph output");
  }
  const ValueState base = s.at(s.base_of(v)).state;
  const bool of_memory = base == ValueState::input || base == ValueState::constant;
  ZC_CHECK(!int8 || of_memory, "converting alias %" << v << " reads a computed i8 value");
  for (const ir::Node& n : g.nodes) {
    if (std::find(n.inputs.begin(), n.inputs.end(), v) == n.inputs.end()) continue;
    if (ops::is_view(n.op) && s.at(n.outputs[0]).state == ValueState::alias) continue;
    if (n.op == ops::OpId::matmul) {
      const int32_t k = s.at(n.outputs[0]).kernel;
      ZC_CHECK(!int8 || (k >= 0 && !s.kernels[k].library),
               "converting alias %" << v << " of an i8 value is read by a library product");
      continue;
    }
    ZC_CHECK(!int8, "converting alias %" << v << " of an i8 value is read by "
                                         << ops::op_def(n.op).name << ", which is not a product");
    ZC_CHECK(reads_through_converting_loads(n.op),
             "converting alias %" << v << " is read by " << ops::op_def(n.op).name
                                  << ", which reads only its own dtype");
    ZC_CHECK(of_memory, "converting alias %"
                            << v << " of a computed value is read by " << ops::op_def(n.op).name
                            << ": only casts of inputs and constants are read by elementwise "
                               "nodes, reductions and attention");
  }
}

}  // namespace

void verify_schedule(const Schedule& s) {
  const ir::Graph& g = s.graph;
  ZC_CHECK(s.values.size() == g.values.size(), "schedule has " << s.values.size()
                                                               << " value records for "
                                                               << g.values.size() << " values");
  const int32_t nk = static_cast<int32_t>(s.kernels.size());

  // Nodes: in exactly one kernel, or views whose output is an alias.
  std::vector<int32_t> owner(g.nodes.size(), -1);
  for (int32_t k = 0; k < nk; ++k) {
    check_kernel_shape(s, k);
    for (int32_t n : s.kernels[k].nodes) {
      ZC_CHECK(n >= 0 && n < static_cast<int32_t>(g.nodes.size()),
               "kernel " << k << " names node " << n << ", which does not exist");
      ZC_CHECK(owner[n] < 0, "node " << n << " is in kernels " << owner[n] << " and " << k);
      owner[n] = k;
      for (ValueId o : g.nodes[n].outputs) {
        ZC_CHECK(s.at(o).kernel == k, "value %" << o << " of node " << n << " in kernel " << k
                                                << " is computed by kernel " << s.at(o).kernel);
      }
    }
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (owner[n] >= 0) continue;
    ValueId o = g.nodes[n].outputs[0];
    const bool converting = g.nodes[n].op == ops::OpId::cast;  // checked with the values below
    ZC_CHECK((ops::is_view(g.nodes[n].op) || converting) && s.at(o).state == ValueState::alias,
             "node " << n << " (" << ops::op_def(g.nodes[n].op).name
                     << ") is in no kernel and is not a view");
  }

  // Values: stores listed where they are written; aliases over materialized bases.
  for (size_t v = 0; v < s.values.size(); ++v) {
    const ValueSchedule& r = s.values[v];
    const ValueId id = static_cast<ValueId>(v);
    if (r.state == ValueState::stored) {
      ZC_CHECK(r.kernel >= 0 && r.kernel < nk, "stored value %" << v << " has no kernel");
      const auto& st = s.kernels[r.kernel].stores;
      ZC_CHECK(std::find(st.begin(), st.end(), id) != st.end(),
               "stored value %" << v << " is not among kernel " << r.kernel << "'s stores");
    }
    if (r.state == ValueState::alias) {
      ZC_CHECK(r.view.base >= 0 && materialized(s.at(r.view.base).state),
               "alias %" << v << " is over %" << r.view.base << ", which is not in memory");
      ZC_CHECK(r.view.strides.size() == g.meta(id).shape.size(),
               "alias %" << v << " has " << r.view.strides.size() << " strides for rank "
                         << g.meta(id).shape.size());
      const DType from = g.meta(r.view.base).dtype, to = g.meta(id).dtype;
      if (from != to) check_converting_alias(s, id, from, to);
    }
    if (r.state == ValueState::fused) {
      ZC_CHECK(r.kernel >= 0 && r.kernel < nk, "fused value %" << v << " has no kernel");
    }
  }
  for (int32_t k = 0; k < nk; ++k) {
    for (ValueId v : s.kernels[k].stores) {
      ZC_CHECK(s.at(v).state == ValueState::stored && s.at(v).kernel == k,
               "kernel " << k << " stores %" << v << ", which it does not compute as stored");
    }
  }

  // Reads: from earlier kernels, through memory.
  for (int32_t k = 0; k < nk; ++k) {
    const Kernel& K = s.kernels[k];
    std::vector<ValueId> reads;
    for (int32_t n : K.nodes) {
      for (ValueId u : g.nodes[n].inputs) reads.push_back(u);
    }
    if (K.copy_from >= 0) reads.push_back(K.copy_from);
    for (ValueId u : reads) {
      ValueId base = s.base_of(u);
      int32_t from = s.at(base).kernel;
      if (from == k && s.at(u).state != ValueState::alias) continue;  // inside the kernel
      ZC_CHECK(materialized(s.at(base).state), "kernel " << k << " reads %" << u << " from kernel "
                                                         << from
                                                         << ", which keeps it in registers");
      ZC_CHECK(from < k,
               "kernel " << k << " reads %" << u << " before kernel " << from << " writes it");
    }
  }

  // Outputs: stored, distinct, as the graph declares them.
  ZC_CHECK(s.outputs.size() == g.outputs.size(),
           "schedule has " << s.outputs.size() << " outputs, the graph " << g.outputs.size());
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    ValueId o = s.outputs[i];
    ZC_CHECK(s.at(o).state == ValueState::stored,
             "output " << i << " (%" << o << ") is not stored");
    ZC_CHECK(std::count(s.outputs.begin(), s.outputs.end(), o) == 1,
             "output " << i << " (%" << o << ") is returned twice");
    ZC_CHECK(g.meta(o).shape == g.meta(g.outputs[i]).shape &&
                 g.meta(o).dtype == g.meta(g.outputs[i]).dtype,
             "output " << i << " has other metadata than the graph's output");
  }
}

}  // namespace zc::codegen
