// Subgraphs of a captured graph, as graphs of their own.
//
// extract_region(): the subgraph of one region (the region itself is its top-level region).
// Its inputs are the values the region reads from outside (in order of first use; parameters
// stay parameters), its outputs the values it defines that are read after it (in definition
// order). Two calls of one module type with the same input metadata give equal canonical
// bytes, whatever their weights: that is how a repeated block is recognized.
//
// extract_range(): the same for any node range [begin, end); the regions that lie entirely
// inside it come along.
//
// RangeExtractor: both, for many ranges of one graph. It indexes the graph once (who reads
// each value last, which values are inputs or constants, regions by first node), so each
// extraction costs the size of its range; extract_range() alone costs the size of the graph,
// and hierarchical compilation extracts every region of a model on every start.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace zc::ir {

struct RegionGraph {
  Graph graph;
  std::vector<ValueId> inputs;   // outer values feeding graph.inputs, in order
  std::vector<ValueId> outputs;  // outer values that graph.outputs define, in order
};

class RangeExtractor {
 public:
  // `g` must outlive the extractor and stay unchanged while it is used.
  explicit RangeExtractor(const Graph& g);

  RegionGraph range(int32_t begin, int32_t end) const;
  RegionGraph region(RegionId region) const;

 private:
  const Graph& g_;
  std::vector<int8_t> input_kind_;  // by value: its InputKind as a graph input, or -1
  std::vector<int32_t> constant_;   // by value: its index in g.constants, or -1
  std::vector<int32_t> last_read_;  // by value: last node reading it; nodes.size() if returned
  std::vector<RegionId> by_begin_;  // region ids ordered by (begin, id)
};

RegionGraph extract_region(const Graph& g, RegionId region);
RegionGraph extract_range(const Graph& g, int32_t begin, int32_t end);

}  // namespace zc::ir
