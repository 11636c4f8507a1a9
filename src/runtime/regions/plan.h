// Which parts of a captured graph are calls of a repeated block (automatic hierarchical
// compilation).
//
// Regions are decided from the largest down: a region that is not inside an outlined one, holds
// at least `min_nodes` captured ops, and whose subgraph hash occurs at least `min_repeats` times
// among such free regions is outlined, a call of its subgraph. Repeats inside outlined blocks do
// not count: they compile with their blocks, so outlining their one free copy would share
// nothing. The nodes outside outlined regions form glue parts between the calls. seed64 becomes
// one glue part (the outer Linear) and 64 calls of one SeedLayer graph; gpt becomes the
// embeddings, n_layer calls of one TransformerBlock graph, and the head; a 12-layer GPT's
// backward becomes 11 calls of one block gradient and the first layer's (it has no input
// gradient) as glue. Only regions in a size class with free repeats are hashed.
#pragma once

#include <string>
#include <vector>

#include "ir/subgraph.h"
#include "util/hash.h"

namespace zc::runtime {

struct RegionRule {
  int min_repeats = 2;
  // A block of fewer ops would cost more in lost fusion with its neighbours (a Linear's
  // activation after it, a residual add) than its compile time saves: see docs/regions.md.
  // A convolution with a fused epilogue counts the ops it took in.
  int min_nodes = 3;
};

struct GraphPart {
  bool outlined = false;       // a call of a repeated region; otherwise glue
  int32_t begin = 0, end = 0;  // node range in the captured graph
  std::string type_name;       // outlined: the module type
  ir::RegionGraph sub;         // the part as a graph, with its outer inputs and outputs
  Digest hash{};               // of sub.graph
};

struct RegionPlan {
  std::vector<GraphPart> parts;  // in node order; empty ranges are left out
  int outlined_calls = 0;        // parts that are calls
  int distinct_blocks = 0;       // distinct outlined subgraphs
};

// Input: a verified captured graph. Output: parts covering every node exactly once, in order;
// when no region qualifies, a single glue part (the whole graph).
RegionPlan plan_regions(const ir::Graph& g, const RegionRule& rule);

}  // namespace zc::runtime
