// First-fit placement of byte ranges in one growing block, for plans made once at compile
// time (a graph's arena, the values between a hierarchical graph's parts): allocate() takes the
// lowest free range that fits or grows the block, release() gives a range back and merges it
// with free neighbours, so that a large value can reuse space freed in pieces.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

namespace zc {

class FreeRanges {
 public:
  // The bytes a value of `bytes` takes: whole 64-byte lines, so that every range starts on one
  // (aligned vector loads) and no two values share a cache line.
  static constexpr int64_t kAlign = 64;
  static int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

  int64_t allocate(int64_t size) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      const int64_t off = it->first, rest = it->second - size;
      free_.erase(it);
      if (rest > 0) free_[off + size] = rest;
      return off;
    }
    top_ += size;
    return top_ - size;
  }

  void release(int64_t off, int64_t size) {
    auto it = free_.emplace(off, size).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  // The block's size: the end of the highest range ever allocated.
  int64_t top() const { return top_; }

 private:
  std::map<int64_t, int64_t> free_;  // offset -> bytes
  int64_t top_ = 0;
};

}  // namespace zc
