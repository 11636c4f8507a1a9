// fold_constants(): a node whose inputs are all constants becomes a constant, computed with
// the op's eager kernel, when its result is small (at most kMaxFoldedElements elements); larger
// results stay computed at run time, where they cost no memory in the graph.
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same values;
// inputs unchanged; constants it made are contiguous and never wrapped numbers; constants
// that lost their last use stay (dce removes them).
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace zc::lower {

inline constexpr int64_t kMaxFoldedElements = 4096;

ir::Graph fold_constants(const ir::Graph& g);

}  // namespace zc::lower
