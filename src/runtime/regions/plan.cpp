#include "runtime/regions/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/canonical.h"

namespace zc::runtime {

RegionPlan plan_regions(const ir::Graph& g, const RegionRule& rule) {
  const size_t n = g.regions.size();
  const ir::RangeExtractor extract(g);
  std::vector<int32_t> depth(n, 0);
  for (size_t r = 0; r < n; ++r) {
    for (ir::RegionId p = g.regions[r].parent; p != ir::kNoRegion; p = g.regions[p].parent)
      ++depth[r];
  }
  // Regions by size, largest first, parents before equal-sized children: when a size is
  // decided, every region that could hold one of that size has been decided already.
  std::map<int32_t, std::vector<ir::RegionId>, std::greater<>> by_size;
  // A convolution that took its epilogue in (lower/channels_last.h) counts the ops it
  // stands for: the block is as large as it was.
  std::vector<int32_t> ops_before(g.nodes.size() + 1, 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int32_t ops = 1;
    if (g.nodes[i].op == ops::OpId::conv2d_nhwc || g.nodes[i].op == ops::OpId::conv2d) {
      const auto& a = std::get<ops::Conv2dAttrs>(g.nodes[i].attrs);
      ops += int32_t{a.residual} + int32_t{a.relu} + int32_t{a.relu6};
    }
    ops_before[i + 1] = ops_before[i] + ops;
  }
  for (size_t r = 0; r < n; ++r) {
    const int32_t size = ops_before[g.regions[r].end] - ops_before[g.regions[r].begin];
    if (size >= rule.min_nodes) by_size[size].push_back(static_cast<ir::RegionId>(r));
  }
  std::vector<bool> outlined(n, false);
  std::vector<ir::RegionGraph> sub(n);
  std::vector<Digest> hash(n);
  auto covered = [&](ir::RegionId r) {
    for (ir::RegionId p = g.regions[r].parent; p != ir::kNoRegion; p = g.regions[p].parent)
      if (outlined[p]) return true;
    return false;
  };
  for (auto& [size, members] : by_size) {
    // Only free regions (not inside an outlined one) count: a repeat inside an outlined block
    // is compiled with that block and shares nothing, so outlining the one free copy would
    // only cost fusion, another graph to load, and a hash to compute on every start.
    std::vector<ir::RegionId> free;
    for (ir::RegionId r : members)
      if (!covered(r)) free.push_back(r);
    if (static_cast<int>(free.size()) < rule.min_repeats) continue;  // equal graphs, equal sizes
    // Copies are counted by node range: a wrapper and the one module it wraps span the same
    // nodes and hash alike, but are one copy.
    std::map<Digest, std::set<std::pair<int32_t, int32_t>>> copies;
    for (ir::RegionId r : free) {
      sub[r] = extract.region(r);
      hash[r] = ir::graph_hash(sub[r].graph);
      copies[hash[r]].insert({g.regions[r].begin, g.regions[r].end});
    }
    std::map<Digest, int> count;
    for (const auto& [h, ranges] : copies) count[h] = static_cast<int>(ranges.size());
    std::stable_sort(free.begin(), free.end(),
                     [&](ir::RegionId a, ir::RegionId b) { return depth[a] < depth[b]; });
    for (ir::RegionId r : free) {
      // A region may hold an equal-sized child (a wrapper module): the outer one wins.
      if (count[hash[r]] >= rule.min_repeats && !covered(r)) outlined[r] = true;
    }
  }
  std::vector<ir::RegionId> calls;
  for (size_t r = 0; r < n; ++r)
    if (outlined[r]) calls.push_back(static_cast<ir::RegionId>(r));
  std::sort(calls.begin(), calls.end(), [&](ir::RegionId a, ir::RegionId b) {
    return g.regions[a].begin < g.regions[b].begin;
  });

  RegionPlan plan;
  auto add_glue = [&](int32_t begin, int32_t end) {
    if (begin >= end) return;
    GraphPart part;
    part.begin = begin;
    part.end = end;
    part.sub = extract.range(begin, end);
    part.hash = ir::graph_hash(part.sub.graph);
    plan.parts.push_back(std::move(part));
  };
  std::set<Digest> distinct;
  int32_t at = 0;
  for (ir::RegionId r : calls) {
    const ir::Region& reg = g.regions[r];
    add_glue(at, reg.begin);
    GraphPart part;
    part.outlined = true;
    part.begin = reg.begin;
    part.end = reg.end;
    part.type_name = reg.type_name;
    part.sub = std::move(sub[r]);
    part.hash = hash[r];
    plan.parts.push_back(std::move(part));
    ++plan.outlined_calls;
    distinct.insert(hash[r]);
    at = reg.end;
  }
  add_glue(at, static_cast<int32_t>(g.nodes.size()));
  plan.distinct_blocks = static_cast<int>(distinct.size());
  return plan;
}

}  // namespace zc::runtime
