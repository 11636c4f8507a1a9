// Minimum s-t cuts of small directed graphs with integer capacities (Dinic's max-flow).
//
// The cut returned is the one closest to the source: the vertices reachable from s in the
// residual graph of a maximum flow. That set is the same for every maximum flow, so the answer
// depends only on the graph, never on the order in which augmenting paths were found; the
// training partitioner relies on it to cut every copy of a repeated block the same way.
#pragma once

#include <cstdint>
#include <vector>

namespace zc {

class MinCut {
 public:
  static constexpr int64_t kInfinite = INT64_MAX / 4;

  explicit MinCut(int vertices);
  // Capacity in [0, kInfinite]; parallel edges add up.
  void add_edge(int from, int to, int64_t capacity);
  // The source side of the minimum cut (true: reachable from `s` after the maximum flow), and
  // the cut's capacity in `value` when given. `t` must not be reachable through infinite
  // edges alone, or the cut would be infinite: that raises.
  std::vector<bool> source_side(int s, int t, int64_t* value = nullptr);

 private:
  struct Edge {
    int to;
    int64_t residual;
  };
  bool levels(int s, int t);
  int64_t push(int v, int t, int64_t limit);

  std::vector<Edge> edges_;            // edge 2k and its reverse 2k+1
  std::vector<std::vector<int>> out_;  // edge indices leaving each vertex
  std::vector<int> level_, next_;
};

}  // namespace zc
