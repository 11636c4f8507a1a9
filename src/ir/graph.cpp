#include "ir/graph.h"

#include <algorithm>

namespace zc::ir {

const char* input_kind_name(InputKind k) {
  switch (k) {
    case InputKind::user:
      return "input";
    case InputKind::parameter:
      return "param";
    case InputKind::carried:
      return "carried";
    case InputKind::lifted:
      return "lifted";
    case InputKind::seed:
      return "seed";
  }
  return "?";
}

ValueId Graph::add_value(ops::TensorMeta meta, int32_t producer) {
  values.push_back(ValueInfo{std::move(meta), producer});
  return static_cast<ValueId>(values.size() - 1);
}

std::vector<RegionId> Graph::top_regions() const {
  std::vector<RegionId> out;
  for (size_t i = 0; i < regions.size(); ++i) {
    if (regions[i].parent == kNoRegion) out.push_back(static_cast<RegionId>(i));
  }
  return out;
}

std::vector<bool> Graph::fit_region_ranges(size_t first_node) {
  std::vector<bool> seen(regions.size(), false);
  for (size_t i = first_node; i < nodes.size(); ++i) {
    const auto index = static_cast<int32_t>(i);
    for (RegionId r = nodes[i].region; r != kNoRegion; r = regions[r].parent) {
      Region& reg = regions[r];
      reg.begin = seen[r] ? std::min(reg.begin, index) : index;
      reg.end = seen[r] ? std::max(reg.end, index + 1) : index + 1;
      seen[r] = true;
    }
  }
  return seen;
}

}  // namespace zc::ir
