// decompose(): rewrites every composite op (one whose registry entry has a `decompose`) into
// the primitive ops the code generator handles, by tracing the decomposition; the ops in `keep`
// (those the target's backend generates itself, such as fused attention on a GPU) stay whole.
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same values
// (within float rounding) with only primitive ops and kept ones; inputs unchanged and in order;
// every node
// emitted for a composite node lies in that node's region; constants the decompositions make
// (scalars, masks) are embedded by value whatever their size.
#pragma once

#include <span>

#include "ir/graph.h"

namespace zc::lower {

ir::Graph decompose(const ir::Graph& g, std::span<const ops::OpId> keep = {});

}  // namespace zc::lower
