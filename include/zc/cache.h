// The persistent compile caches: statistics, and portable bundles that warm another machine.
//
//   auto bytes = zc::cache::save_artifacts();          // after compiling: every entry used
//   auto report = zc::cache::load_artifacts(bytes);    // elsewhere, before compiling
//
// Configuration is by environment: ZC_CACHE_DIR, ZC_CACHE_MAX_BYTES, ZC_FORCE_DISABLE_CACHES,
// ZC_CACHE_HMAC_KEY_FILE (sign bundles on save; require and verify signatures on load).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zc::cache {

// Lookups of one cache level ("graph", "lowering", "kernel", "autotune") in one tier
// ("memory", "disk"), in this process.
struct LevelStats {
  std::string level, tier;
  int64_t hits = 0, misses = 0, errors = 0, puts = 0, put_failures = 0;
  double saved_ms = 0;  // compile time the hits saved
};

struct Stats {
  std::string dir;         // the local store; empty when persistence is off
  bool persistent = true;  // false under ZC_FORCE_DISABLE_CACHES=1
  std::vector<LevelStats> levels;
  const LevelStats* find(const std::string& level, const std::string& tier) const;
  std::string str() const;
  std::string json() const;
};

Stats stats();

// A bundle of every cache entry this process produced or used, signed when
// ZC_CACHE_HMAC_KEY_FILE is set.
std::vector<uint8_t> save_artifacts();

struct LoadReport {
  struct Item {
    std::string level, key;
    std::string status;  // "loaded", "already present" or "refused"
    std::string reason;  // for refusals: wrong build id, wrong ISA, bad checksum, ...
  };
  std::vector<Item> items;
  int loaded = 0, already_present = 0, refused = 0;
  std::string str() const;
  std::string json() const;
};

// Verifies every entry of a bundle and writes the usable ones into the local cache. Raises
// zc::Error only when the bytes are not a bundle at all.
LoadReport load_artifacts(std::span<const uint8_t> bytes);

}  // namespace zc::cache
