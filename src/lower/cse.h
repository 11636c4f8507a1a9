// eliminate_common_subexpressions(): constants with equal metadata and equal bytes become one
// constant, and a node with the same op, attributes and inputs as an earlier node of the same
// region becomes that node (ops are pure). Nodes of different regions are never merged: a
// region reading a value that another region computed would no longer look like the other
// copies of its block.
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same values;
// inputs unchanged (two inputs are never merged: the runtime binds them by position).
#pragma once

#include "ir/graph.h"

namespace zc::lower {

ir::Graph eliminate_common_subexpressions(const ir::Graph& g);

}  // namespace zc::lower
