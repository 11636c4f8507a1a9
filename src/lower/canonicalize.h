// canonicalize(): the clean-up passes, repeated until the graph stops changing: peephole
// (identity ops, layout chains), fold_constants, eliminate_common_subexpressions,
// eliminate_dead_code. Each pass can expose work for another (a folded constant equals
// another one, merging them makes two nodes equal, merging those leaves dead code ...).
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same values,
// with no identity layout op or cast, no chain of one layout op within a region, no node on
// constants only with a result of at most kMaxFoldedElements, no two equal constants, no two
// equal nodes in one region, and no node or constant whose value is unused; inputs unchanged.
#pragma once

#include "ir/graph.h"

namespace zc::lower {

ir::Graph canonicalize(const ir::Graph& g);

}  // namespace zc::lower
