// split_reductions(): a sum of many elements into few results becomes two sums, the first over
// the innermost reduced dims (kept as size-1 dims), the second over the rest. A GPU reduces one
// row per block: a loss's mean over a whole [8, 128, 768] batch would otherwise run as a single
// block over 786432 elements on one multiprocessor, while its first stage here is 1024 rows of
// 768, and its second one row of 1024. Asked for by backends of that kind
// (Backend::splits_long_reductions); the CPU backend reduces with parallel loops and keeps one
// sum.
//
// Which sums: at least kSplitMinElements elements reduced, into at most kSplitMaxResults
// results, over at least two dims, of which a suffix covers kSplitMinRow to all but the first.
// The first stage's result is stored in the sum's dtype, so the total may differ from the
// one-stage sum in the last bits of that dtype (each stage accumulates in double).
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same values up
// to that rounding; inputs unchanged.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace zc::lower {

inline constexpr int64_t kSplitMinElements = int64_t{1} << 16;
inline constexpr int64_t kSplitMaxResults = 64;
inline constexpr int64_t kSplitMinRow = 256;

ir::Graph split_reductions(const ir::Graph& g);

}  // namespace zc::lower
