// decompose(): rewrites every composite op (one whose registry entry has a `decompose`) into
// the primitive ops the code generator handles, by tracing the decomposition.
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same values
// (within float rounding) with only primitive ops; inputs unchanged and in order; every node
// emitted for a composite node lies in that node's region; constants the decompositions make
// (scalars, masks) are embedded by value whatever their size.
#pragma once

#include "ir/graph.h"

namespace zc::lower {

ir::Graph decompose(const ir::Graph& g);

}  // namespace zc::lower
