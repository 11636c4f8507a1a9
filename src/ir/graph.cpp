#include "ir/graph.h"

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

}  // namespace zc::ir
