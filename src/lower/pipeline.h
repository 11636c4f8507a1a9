// The lowering stage: a captured graph to a graph of primitive ops only, ready for the code
// generator. A pure function of the graph and the context.
#pragma once

#include "ir/graph.h"

namespace zc::lower {

struct LowerContext {
  bool verify = true;  // run the verifier after every pass
};

// Input: a captured graph that verifies. Output: a graph that verifies, computes the same
// values, has the same inputs in the same order and the same regions (ranges moved), and whose
// every op is a primitive (its registry entry has no decomposition).
ir::Graph lower(const ir::Graph& captured, const LowerContext& ctx);

}  // namespace zc::lower
