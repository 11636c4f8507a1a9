#include "runtime/backend_layout.h"

#include <algorithm>

#include "lower/channels_last.h"

namespace zc::runtime {

ir::Graph in_backend_layout(ir::Graph captured, const codegen::Backend& backend) {
  const std::vector<ops::OpId> keep = backend.native_ops();
  if (std::find(keep.begin(), keep.end(), ops::OpId::conv2d_nhwc) == keep.end()) return captured;
  return lower::channels_last(captured);
}

}  // namespace zc::runtime
