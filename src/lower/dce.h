// eliminate_dead_code(): removes the nodes none of whose outputs is used by a live node or
// returned, and the constants nothing uses (ops are pure, so nothing else can observe them).
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same outputs;
// inputs unchanged, used or not (the runtime binds them by position).
#pragma once

#include "ir/graph.h"

namespace zc::lower {

ir::Graph eliminate_dead_code(const ir::Graph& g);

}  // namespace zc::lower
