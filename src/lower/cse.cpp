#include "lower/cse.h"

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "lower/graph_builder.h"
#include "ops/eager.h"

namespace zc::lower {

namespace {

size_t mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

struct ConstantKey {
  ops::TensorMeta meta;
  std::string bytes;
  bool operator==(const ConstantKey&) const = default;
};
struct ConstantHash {
  size_t operator()(const ConstantKey& k) const {
    size_t h = std::hash<std::string>()(k.bytes);
    for (int64_t d : k.meta.shape) h = mix(h, static_cast<size_t>(d));
    return mix(h, static_cast<size_t>(k.meta.dtype));
  }
};

ConstantKey constant_key(const ops::TensorMeta& meta, const Tensor& data) {
  Tensor c = ops::eager_contiguous(data);
  const char* p = static_cast<const char*>(c.raw_data());
  return ConstantKey{meta, std::string(p, static_cast<size_t>(c.numel()) * dtype_size(c.dtype()))};
}

// Output values are numbered by the builder, so equal inputs mean equal ids.
struct NodeKey {
  ops::OpId op;
  ir::RegionId region;
  ops::Attrs attrs;
  std::vector<ir::ValueId> inputs;
  bool operator==(const NodeKey&) const = default;
};
struct NodeHash {
  size_t operator()(const NodeKey& k) const {
    size_t h = mix(static_cast<size_t>(k.op), static_cast<size_t>(k.region));
    for (ir::ValueId v : k.inputs) h = mix(h, static_cast<size_t>(v));
    return h;  // attributes only split what collides here
  }
};

}  // namespace

ir::Graph eliminate_common_subexpressions(const ir::Graph& g) {
  GraphBuilder b(g, /*copy_constants=*/false);
  std::unordered_map<ConstantKey, ir::ValueId, ConstantHash> constants;
  for (const ir::Constant& c : g.constants) {
    auto [it, fresh] = constants.try_emplace(constant_key(g.meta(c.value), c.data), -1);
    if (fresh) {
      b.copy_constant(c);
      it->second = b.map(c.value);
    } else {
      b.alias(c.value, it->second);
    }
  }
  std::unordered_map<NodeKey, const ir::Node*, NodeHash> nodes;  // the first node of each key
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    b.begin_node(static_cast<int32_t>(i));
    auto [it, fresh] =
        nodes.try_emplace(NodeKey{node.op, node.region, node.attrs, b.map(node.inputs)}, &node);
    if (fresh) {
      b.copy_node(node);
    } else {
      for (size_t o = 0; o < node.outputs.size(); ++o)
        b.alias(node.outputs[o], b.map(it->second->outputs[o]));
    }
  }
  return std::move(b).finish();
}

}  // namespace zc::lower
