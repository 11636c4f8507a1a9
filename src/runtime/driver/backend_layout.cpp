#include "runtime/driver/backend_layout.h"

#include <algorithm>

#include "lower/channels_last.h"

namespace zc::runtime {

ir::Graph in_backend_layout(ir::Graph captured, const codegen::Backend& backend) {
  const std::vector<ops::OpId> keep = backend.native_ops();
  auto kept = [&](ops::OpId op) { return std::find(keep.begin(), keep.end(), op) != keep.end(); };
  if (kept(ops::OpId::conv2d_nhwc)) return lower::channels_last(captured);
  return kept(ops::OpId::conv2d) ? lower::conv_epilogues(captured) : captured;
}

}  // namespace zc::runtime
