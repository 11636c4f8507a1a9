// What the cache tier benchmarks (cache_store, cache_remote) share: their entries, and the
// loops that time a hit and a miss on any tier.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "cache/entry.h"
#include "cache/tier.h"
#include "util/hash.h"

namespace zc_bench {

// A kernel-level entry of `size` payload bytes, its key unique to (i, size).
inline zc::cache::Entry bench_entry(int i, size_t size) {
  zc::cache::Entry e;
  e.level = zc::cache::Level::kernel;
  e.key = zc::sha256("bench " + std::to_string(i) + " " + std::to_string(size));
  e.compile_ms = 50;
  e.created_unix = 1'700'000'000;
  e.payload.assign(size, static_cast<uint8_t>(i));
  return e;
}

// Stores `e` in `tier`, then times looking it up.
inline void time_hits(benchmark::State& state, zc::cache::Tier& tier, const zc::cache::Entry& e) {
  if (!tier.put(e).ok) state.SkipWithError("put failed");
  for (auto _ : state) {
    zc::cache::GetResult r = tier.get(e.level, e.key);
    if (r.outcome != zc::cache::Outcome::hit) state.SkipWithError("not a hit");
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * e.payload.size()));
}

// Times looking up `absent`, which `tier` does not hold.
inline void time_misses(benchmark::State& state, zc::cache::Tier& tier,
                        const zc::cache::Entry& absent) {
  for (auto _ : state) {
    zc::cache::GetResult r = tier.get(absent.level, absent.key);
    if (r.outcome != zc::cache::Outcome::miss) state.SkipWithError("not a miss");
    benchmark::DoNotOptimize(r);
  }
}

}  // namespace zc_bench
