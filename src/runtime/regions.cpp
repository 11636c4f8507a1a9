#include "runtime/regions.h"

#include <functional>
#include <map>
#include <set>

#include "ir/canonical.h"

namespace zc::runtime {

RegionPlan plan_regions(const ir::Graph& g, const RegionRule& rule) {
  // Subgraph hash of every region, and how often each occurs. The subgraphs are kept: the
  // outlined ones become parts.
  const ir::RangeExtractor extract(g);
  std::vector<Digest> hash(g.regions.size());
  std::vector<bool> hashed(g.regions.size(), false);
  std::vector<ir::RegionGraph> sub(g.regions.size());
  std::map<Digest, int> count;
  // Equal subgraphs have equal sizes, so a region whose size no other region shares cannot
  // repeat: it is not hashed (the model's own region, the size of the whole graph, among them).
  std::map<int32_t, int> same_size;
  for (const ir::Region& reg : g.regions) ++same_size[reg.end - reg.begin];
  for (size_t r = 0; r < g.regions.size(); ++r) {
    int32_t size = g.regions[r].end - g.regions[r].begin;
    if (size < rule.min_nodes || same_size[size] < rule.min_repeats) continue;
    sub[r] = extract.region(static_cast<ir::RegionId>(r));
    hash[r] = ir::graph_hash(sub[r].graph);
    hashed[r] = true;
    ++count[hash[r]];
  }
  std::vector<std::vector<ir::RegionId>> children(g.regions.size());
  std::vector<ir::RegionId> top;
  for (size_t r = 0; r < g.regions.size(); ++r) {
    ir::RegionId p = g.regions[r].parent;
    (p == ir::kNoRegion ? top : children[p]).push_back(static_cast<ir::RegionId>(r));
  }
  // Outlined regions in node order, found top-down.
  std::vector<ir::RegionId> outlined;
  std::function<void(ir::RegionId)> visit = [&](ir::RegionId r) {
    if (hashed[r] && count[hash[r]] >= rule.min_repeats) {
      outlined.push_back(r);
      return;
    }
    for (ir::RegionId c : children[r]) visit(c);
  };
  for (ir::RegionId r : top) visit(r);

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
  for (ir::RegionId r : outlined) {
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
