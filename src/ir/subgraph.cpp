#include "ir/subgraph.h"

#include <unordered_map>

namespace zc::ir {

RegionGraph extract_region(const Graph& g, RegionId region) {
  const Region& reg = g.regions[region];
  return extract_range(g, reg.begin, reg.end);
}

RegionGraph extract_range(const Graph& g, int32_t begin, int32_t end) {
  RegionGraph out;
  Graph& sub = out.graph;
  std::unordered_map<ValueId, ValueId> map;  // outer -> inner
  std::unordered_map<ValueId, InputKind> input_kind;
  std::unordered_map<ValueId, const Constant*> constant;
  for (const Input& in : g.inputs) input_kind[in.value] = in.kind;
  for (const Constant& c : g.constants) constant[c.value] = &c;

  auto inner = [&](ValueId v) -> ValueId {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    ValueId id = sub.add_value(g.meta(v));
    map[v] = id;
    if (auto c = constant.find(v); c != constant.end()) {
      sub.constants.push_back(Constant{id, c->second->data});
    } else {
      auto k = input_kind.find(v);
      InputKind kind =
          k != input_kind.end() && k->second != InputKind::carried ? k->second : InputKind::user;
      sub.inputs.push_back(Input{id, kind});
      out.inputs.push_back(v);
    }
    return id;
  };

  std::vector<ValueId> defined;
  for (int32_t i = begin; i < end; ++i) {
    const Node& n = g.nodes[i];
    Node copy;
    copy.op = n.op;
    copy.attrs = n.attrs;
    for (ValueId v : n.inputs) copy.inputs.push_back(inner(v));
    for (ValueId v : n.outputs) {
      ValueId id = sub.add_value(g.meta(v), static_cast<int32_t>(sub.nodes.size()));
      map[v] = id;
      copy.outputs.push_back(id);
      defined.push_back(v);
    }
    copy.region = kNoRegion;
    sub.nodes.push_back(std::move(copy));
  }
  // Regions lying entirely inside the range, re-based to the subgraph's node numbering; a
  // region whose parent is not inside becomes a top-level region of the subgraph.
  std::unordered_map<RegionId, RegionId> region_map;
  for (size_t r = 0; r < g.regions.size(); ++r) {
    const Region& child = g.regions[r];
    if (child.begin < begin || child.end > end ||
        (child.begin == child.end && child.begin == end)) {
      continue;
    }
    Region copy = child;
    auto parent = region_map.find(child.parent);
    copy.parent = parent == region_map.end() ? kNoRegion : parent->second;
    copy.begin -= begin;
    copy.end -= begin;
    region_map[static_cast<RegionId>(r)] = static_cast<RegionId>(sub.regions.size());
    sub.regions.push_back(std::move(copy));
  }
  for (int32_t i = begin; i < end; ++i) {
    const Node& n = g.nodes[i];
    // The innermost region that came along (a node of a region cut by the range keeps none).
    RegionId r = n.region;
    while (r != kNoRegion && !region_map.count(r)) r = g.regions[r].parent;
    sub.nodes[i - begin].region = r == kNoRegion ? kNoRegion : region_map[r];
  }
  // Outputs: values defined inside and read after the region or returned.
  std::vector<bool> used_after(g.values.size(), false);
  for (size_t i = end; i < g.nodes.size(); ++i) {
    for (ValueId v : g.nodes[i].inputs) used_after[v] = true;
  }
  for (ValueId v : g.outputs) used_after[v] = true;
  for (ValueId v : defined) {
    if (used_after[v]) {
      sub.outputs.push_back(map[v]);
      out.outputs.push_back(v);
    }
  }
  return out;
}

}  // namespace zc::ir
