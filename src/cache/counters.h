// The lookup and store counters of one process, per cache level and tier kind: what
// zc::cache::stats() shows, and what the local store's lifetime statistics are fed from. A
// compile keeps a table of its own too, which the cache counts its lookups in besides the
// process's (Cache::get's `also`): its report then says what it found where, exactly, whatever
// else the process looks up meanwhile.
// Keyed by values, never by names: the names ("graph", "redis") are for display only. Every
// method is safe to call from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>

#include "cache/entry.h"
#include "cache/lifetime_stats.h"
#include "cache/tier.h"

namespace zc::cache {

struct CounterKey {
  Level level = Level::graph;
  TierKind tier = TierKind::memory;
};

// Counters of one level in one tier.
struct TierCounters {
  int64_t hits = 0, misses = 0, errors = 0, puts = 0, put_failures = 0, bytes_written = 0;
  double saved_ms = 0;  // compile time the hits saved
  void add(const TierCounters& o);
};

// Every level's counters in every tier, as plain values: a table's contents at one moment.
struct CounterSnapshot {
  std::array<TierCounters, kLevelCount * kTierKindCount> counters{};
  static size_t index(CounterKey key) {
    return level_index(key.level) * kTierKindCount + static_cast<size_t>(key.tier);
  }
  TierCounters& at(CounterKey key) { return counters[index(key)]; }
  const TierCounters& at(CounterKey key) const { return counters[index(key)]; }
  void add(const CounterSnapshot& o);
};

class CounterTable {
 public:
  // A lookup's outcome; a hit adds the compile time it saved.
  void count_lookup(CounterKey key, Outcome outcome, double saved_ms);
  // A store of `bytes` (header and payload) that succeeded or failed.
  void count_put(CounterKey key, bool ok, int64_t bytes);
  TierCounters get(CounterKey key) const;
  CounterSnapshot snapshot() const;
  // What `tier` counted since the previous call (or since the start), as a lifetime delta of
  // every level; nullopt when no lookup or store of it was counted meanwhile. Each count is
  // thus handed out once, however often the statistics are flushed.
  std::optional<LifetimeDelta> take_unflushed(TierKind tier);

 private:
  static size_t index(CounterKey key) { return CounterSnapshot::index(key); }

  mutable std::mutex mu_;
  std::array<TierCounters, kLevelCount * kTierKindCount> now_{}, flushed_{};
};

}  // namespace zc::cache
