// The lowering stage: a captured graph to a graph of primitive ops only, ready for the code
// generator. A pure function of the graph and the context.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace zc::lower {

struct LowerContext {
  bool verify = true;  // run the verifier after every pass
  // Composite ops left whole for the code generator (Backend::native_ops: ops a backend
  // generates better than their decompositions). What lowering makes depends on it, so it is
  // part of the lowering level's cache key. Keeping conv2d_nhwc also asks for the
  // channels_last pass (channels_last.h).
  std::vector<ops::OpId> keep;
  // Split long sums into two stages (split_reductions.h; Backend::splits_long_reductions). Part
  // of the lowering level's cache key too.
  bool split_long_reductions = false;
};

// Input: a captured graph that verifies. Output: a graph that verifies, computes the same
// values, has the same inputs in the same order and the same regions (ranges moved), and whose
// every op is a primitive (its registry entry has no decomposition) or one of ctx.keep.
ir::Graph lower(const ir::Graph& captured, const LowerContext& ctx);

}  // namespace zc::lower
