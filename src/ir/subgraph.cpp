#include "ir/subgraph.h"

#include <algorithm>
#include <unordered_map>

#include "util/check.h"

namespace zc::ir {

RangeExtractor::RangeExtractor(const Graph& g)
    : g_(g),
      input_kind_(g.values.size(), -1),
      constant_(g.values.size(), -1),
      last_read_(g.values.size(), -1) {
  for (const Input& in : g.inputs) input_kind_[in.value] = static_cast<int8_t>(in.kind);
  for (size_t c = 0; c < g.constants.size(); ++c)
    constant_[g.constants[c].value] = static_cast<int32_t>(c);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (ValueId v : g.nodes[i].inputs) last_read_[v] = static_cast<int32_t>(i);
  }
  for (ValueId v : g.outputs) last_read_[v] = static_cast<int32_t>(g.nodes.size());
  by_begin_.resize(g.regions.size());
  for (size_t r = 0; r < g.regions.size(); ++r) by_begin_[r] = static_cast<RegionId>(r);
  std::stable_sort(by_begin_.begin(), by_begin_.end(),
                   [&](RegionId a, RegionId b) { return g.regions[a].begin < g.regions[b].begin; });
}

RegionGraph RangeExtractor::region(RegionId region) const {
  ZC_CHECK(region >= 0 && static_cast<size_t>(region) < g_.regions.size(),
           "extract_region: no such region");
  const Region& reg = g_.regions[region];
  return range(reg.begin, reg.end);
}

RegionGraph RangeExtractor::range(int32_t begin, int32_t end) const {
  const Graph& g = g_;
  ZC_CHECK(0 <= begin && begin <= end && static_cast<size_t>(end) <= g.nodes.size(),
           "extract_range: node range out of bounds");
  RegionGraph out;
  Graph& sub = out.graph;
  std::unordered_map<ValueId, ValueId> map;  // outer -> inner
  map.reserve(static_cast<size_t>(end - begin) * 3);

  auto inner = [&](ValueId v) -> ValueId {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    ValueId id = sub.add_value(g.meta(v));
    map[v] = id;
    if (constant_[v] >= 0) {
      sub.constants.push_back(Constant{id, g.constants[constant_[v]].data});
    } else {
      // A carried value (a graph-break segment's input) is an ordinary input to a part.
      auto kind = static_cast<InputKind>(input_kind_[v]);
      bool keep = input_kind_[v] >= 0 && kind != InputKind::carried;
      sub.inputs.push_back(Input{id, keep ? kind : InputKind::user});
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
  // Regions lying entirely inside the range, in their original order, re-based to the
  // subgraph's node numbering; a region whose parent is not inside becomes a top-level region
  // of the subgraph. An empty region at `end` belongs to what follows, not to this range.
  std::vector<RegionId> inside;
  auto first = std::lower_bound(by_begin_.begin(), by_begin_.end(), begin,
                                [&](RegionId r, int32_t b) { return g.regions[r].begin < b; });
  for (auto it = first; it != by_begin_.end() && g.regions[*it].begin <= end; ++it) {
    const Region& child = g.regions[*it];
    if (child.end > end || (child.begin == child.end && child.begin == end)) continue;
    inside.push_back(*it);
  }
  std::sort(inside.begin(), inside.end());
  std::unordered_map<RegionId, RegionId> region_map;
  for (RegionId r : inside) {
    Region copy = g.regions[r];
    auto parent = region_map.find(copy.parent);
    copy.parent = parent == region_map.end() ? kNoRegion : parent->second;
    copy.begin -= begin;
    copy.end -= begin;
    region_map[r] = static_cast<RegionId>(sub.regions.size());
    sub.regions.push_back(std::move(copy));
  }
  for (int32_t i = begin; i < end; ++i) {
    // The innermost region that came along (a node of a region cut by the range keeps none).
    RegionId r = g.nodes[i].region;
    while (r != kNoRegion && !region_map.count(r)) r = g.regions[r].parent;
    sub.nodes[i - begin].region = r == kNoRegion ? kNoRegion : region_map[r];
  }
  // Outputs: values defined inside and read after the range or returned.
  for (ValueId v : defined) {
    if (last_read_[v] >= end) {
      sub.outputs.push_back(map[v]);
      out.outputs.push_back(v);
    }
  }
  return out;
}

RegionGraph extract_region(const Graph& g, RegionId region) {
  return RangeExtractor(g).region(region);
}

RegionGraph extract_range(const Graph& g, int32_t begin, int32_t end) {
  return RangeExtractor(g).range(begin, end);
}

}  // namespace zc::ir
