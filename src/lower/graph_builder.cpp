#include "lower/graph_builder.h"

#include "util/check.h"

namespace zc::lower {

GraphBuilder::GraphBuilder(const ir::Graph& in, bool copy_constants)
    : in_(in), map_(in.values.size(), -1), start_(in.nodes.size() + 1, 0) {
  for (const ir::Input& input : in.inputs) {
    ir::ValueId id = out_.add_value(in.meta(input.value));
    out_.inputs.push_back(ir::Input{id, input.kind});
    map_[input.value] = id;
  }
  if (copy_constants) {
    for (const ir::Constant& c : in.constants) copy_constant(c);
  }
  out_.regions = in.regions;
}

ir::ValueId GraphBuilder::map(ir::ValueId old) const {
  ZC_CHECK(old >= 0 && static_cast<size_t>(old) < map_.size() && map_[old] >= 0,
           "value %" << old << " was used before the pass defined it");
  return map_[old];
}

std::vector<ir::ValueId> GraphBuilder::map(std::span<const ir::ValueId> old) const {
  std::vector<ir::ValueId> out;
  out.reserve(old.size());
  for (ir::ValueId v : old) out.push_back(map(v));
  return out;
}

void GraphBuilder::alias(ir::ValueId old, ir::ValueId now) {
  map_[old] = now;
}

void GraphBuilder::begin_node(int32_t old_index) {
  ZC_CHECK(old_index >= next_start_ - 1 && old_index < static_cast<int32_t>(in_.nodes.size()),
           "nodes begun out of order");
  while (next_start_ <= old_index) start_[next_start_++] = static_cast<int32_t>(out_.nodes.size());
  region_ = in_.nodes[old_index].region;
}

void GraphBuilder::copy_node(const ir::Node& old) {
  ir::Node n;
  n.op = old.op;
  n.attrs = old.attrs;
  n.inputs = map(old.inputs);
  n.region = region_;
  int32_t index = static_cast<int32_t>(out_.nodes.size());
  for (ir::ValueId v : old.outputs) {
    ir::ValueId id = out_.add_value(in_.meta(v), index);
    n.outputs.push_back(id);
    map_[v] = id;
  }
  out_.nodes.push_back(std::move(n));
}

std::vector<ir::ValueId> GraphBuilder::add_node(ops::OpId op, const ops::Attrs& attrs,
                                                std::vector<ir::ValueId> inputs) {
  std::vector<ops::TensorMeta> metas;
  metas.reserve(inputs.size());
  for (ir::ValueId v : inputs) metas.push_back(out_.meta(v));
  const ops::OpDef& def = ops::op_def(op);
  std::vector<ops::TensorMeta> outs = ops::infer_outputs(def, metas, attrs);
  ir::Node n;
  n.op = op;
  n.attrs = attrs;
  n.inputs = std::move(inputs);
  n.region = region_;
  int32_t index = static_cast<int32_t>(out_.nodes.size());
  for (ops::TensorMeta& m : outs) n.outputs.push_back(out_.add_value(std::move(m), index));
  out_.nodes.push_back(std::move(n));
  return out_.nodes.back().outputs;
}

ir::ValueId GraphBuilder::add_constant(Tensor data) {
  ZC_CHECK(data.defined() && data.device().is_cpu() && data.is_contiguous() && !data.is_traced(),
           "a graph constant must be a contiguous CPU tensor");
  ops::TensorMeta meta = ops::meta_of(data);
  return push_constant(std::move(meta), std::move(data));
}

void GraphBuilder::copy_constant(const ir::Constant& old) {
  map_[old.value] = push_constant(in_.meta(old.value), old.data);
}

ir::ValueId GraphBuilder::push_constant(ops::TensorMeta meta, Tensor data) {
  ir::ValueId id = out_.add_value(std::move(meta));
  constant_of_.resize(out_.values.size(), -1);
  constant_of_[id] = static_cast<int32_t>(out_.constants.size());
  out_.constants.push_back(ir::Constant{id, std::move(data)});
  return id;
}

const Tensor* GraphBuilder::constant(ir::ValueId now) const {
  if (static_cast<size_t>(now) >= constant_of_.size() || constant_of_[now] < 0) return nullptr;
  return &out_.constants[constant_of_[now]].data;
}

const ir::Node* GraphBuilder::producer(ir::ValueId now) const {
  int32_t p = out_.values[now].producer;
  return p < 0 ? nullptr : &out_.nodes[p];
}

ir::Graph GraphBuilder::finish() && {
  int32_t n = static_cast<int32_t>(in_.nodes.size());
  while (next_start_ <= n) start_[next_start_++] = static_cast<int32_t>(out_.nodes.size());
  for (ir::Region& r : out_.regions) {
    r.begin = start_[r.begin];
    r.end = start_[r.end];
  }
  out_.outputs = map(in_.outputs);
  return std::move(out_);
}

}  // namespace zc::lower
