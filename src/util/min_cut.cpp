#include "util/min_cut.h"

#include <algorithm>
#include <deque>

#include "util/check.h"

namespace zc {

MinCut::MinCut(int vertices) : out_(vertices), level_(vertices), next_(vertices) {}

void MinCut::add_edge(int from, int to, int64_t capacity) {
  ZC_CHECK(from >= 0 && to >= 0 && from < static_cast<int>(out_.size()) &&
               to < static_cast<int>(out_.size()) && capacity >= 0 && capacity <= kInfinite,
           "min cut: bad edge " << from << " -> " << to << " (" << capacity << ")");
  out_[from].push_back(static_cast<int>(edges_.size()));
  edges_.push_back(Edge{to, capacity});
  out_[to].push_back(static_cast<int>(edges_.size()));
  edges_.push_back(Edge{from, 0});
}

// Breadth-first levels over edges with residual capacity; whether t is reachable.
bool MinCut::levels(int s, int t) {
  std::fill(level_.begin(), level_.end(), -1);
  std::deque<int> queue{s};
  level_[s] = 0;
  while (!queue.empty()) {
    int v = queue.front();
    queue.pop_front();
    for (int e : out_[v]) {
      if (edges_[e].residual > 0 && level_[edges_[e].to] < 0) {
        level_[edges_[e].to] = level_[v] + 1;
        queue.push_back(edges_[e].to);
      }
    }
  }
  return level_[t] >= 0;
}

// One blocking-flow step: pushes up to `limit` from v towards t along increasing levels.
int64_t MinCut::push(int v, int t, int64_t limit) {
  if (v == t) return limit;
  for (int& i = next_[v]; i < static_cast<int>(out_[v].size()); ++i) {
    Edge& e = edges_[out_[v][i]];
    if (e.residual <= 0 || level_[e.to] != level_[v] + 1) continue;
    int64_t pushed = push(e.to, t, std::min(limit, e.residual));
    if (pushed > 0) {
      e.residual -= pushed;
      edges_[out_[v][i] ^ 1].residual += pushed;
      return pushed;
    }
  }
  return 0;
}

std::vector<bool> MinCut::source_side(int s, int t, int64_t* value) {
  int64_t flow = 0;
  while (levels(s, t)) {
    std::fill(next_.begin(), next_.end(), 0);
    while (int64_t pushed = push(s, t, kInfinite)) {
      flow += pushed;
      if (flow >= kInfinite) throw Error("min cut: the sink is reachable through infinite edges");
    }
  }
  if (value) *value = flow;
  std::vector<bool> side(out_.size());
  for (size_t v = 0; v < out_.size(); ++v) side[v] = level_[v] >= 0;
  return side;
}

}  // namespace zc
