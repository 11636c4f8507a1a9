// Lifetime statistics of a local cache store ("like ccache -s"): counters per cache level,
// summed over every process that has used the store since the statistics were last zeroed.
// A process collects a LifetimeDelta and merges it into the store (DiskTier::add_lifetime);
// readers get a LifetimeStats. Plain values: no locking, no I/O here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/entry.h"

namespace zc::cache {

struct LifetimeCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t errors = 0;  // entries refused as corrupt or unreadable (also counted apart from misses)
  uint64_t puts = 0;
  uint64_t bytes_written = 0;
  double compile_ms_saved = 0;  // sum over hits of the compile time the entry recorded

  LifetimeCounters& operator+=(const LifetimeCounters& o);
  bool empty() const;
};

inline constexpr size_t kLevelCount = std::size(kLevels);

// Index with level_index(level).
inline constexpr size_t level_index(Level l) {
  return static_cast<size_t>(l) - 1;
}

struct LifetimeDelta {
  std::array<LifetimeCounters, kLevelCount> levels{};

  LifetimeCounters& at(Level l) { return levels[level_index(l)]; }
  const LifetimeCounters& at(Level l) const { return levels[level_index(l)]; }
  void add(Level l, uint64_t hits, uint64_t misses, uint64_t errors, uint64_t puts,
           double compile_ms_saved, uint64_t bytes_written = 0);
  bool empty() const;
};

struct LifetimeStats {
  std::array<LifetimeCounters, kLevelCount> levels{};
  uint64_t zeroed_unix = 0;  // when counting began (store created or statistics reset)

  const LifetimeCounters& at(Level l) const { return levels[level_index(l)]; }
  LifetimeCounters total() const;
  void merge(const LifetimeDelta& d);

  // {"zeroed_unix":..., "levels":{"graph":{"hits":..,...},...}, "total":{...}}
  std::string to_json() const;
  // A fixed-width table, one row per level and a total row, sizes and times humanized.
  std::string to_table() const;
};

// The statistics file's contents: fixed size, checksummed, little-endian.
inline constexpr size_t kLifetimeStatsFileSize = 8 + 4 + 4 + 8 + kLevelCount * 6 * 8 + 8;
std::vector<uint8_t> encode_lifetime_stats(const LifetimeStats& s);
// nullopt with *why set for anything but an intact file of this format.
std::optional<LifetimeStats> decode_lifetime_stats(std::span<const uint8_t> bytes,
                                                   std::string* why);

}  // namespace zc::cache
