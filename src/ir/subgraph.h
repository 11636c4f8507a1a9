// extract_region(): the subgraph of one region as a graph of its own (the region itself is its
// top-level region). Its inputs are the
// values the region reads from outside (in order of first use; parameters stay parameters),
// its outputs the values it defines that are read after it (in definition order). Two calls of
// one module type with the same input metadata give equal canonical bytes, whatever their
// weights: that is how a repeated block is recognized.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace zc::ir {

struct RegionGraph {
  Graph graph;
  std::vector<ValueId> inputs;   // outer values feeding graph.inputs, in order
  std::vector<ValueId> outputs;  // outer values that graph.outputs define, in order
};

RegionGraph extract_region(const Graph& g, RegionId region);

// The same for any node range [begin, end): its inputs are the values it reads from outside,
// its outputs the values it defines that are read after it or returned, and the regions that
// lie entirely inside it come along.
RegionGraph extract_range(const Graph& g, int32_t begin, int32_t end);

}  // namespace zc::ir
