// A cache tier stores encoded entries (entry.h) by (level, key). Tiers store bytes and know no
// compiler objects. Every method is safe to call from many threads, and a tier never throws
// for a missing, corrupt or unwritable entry: those are misses or failed writes, reported
// through the result.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/entry.h"

namespace zc::cache {

enum class Outcome : uint8_t { hit, miss, error };

struct GetResult {
  Outcome outcome = Outcome::miss;
  std::optional<Entry> entry;  // set on hit: verified against level and key
  std::string reason;          // on error: why the stored entry was refused (it is removed)
};

struct PutResult {
  bool ok = false;
  std::string reason;  // on failure: why (read-only directory, disk full, ...)
};

struct TierListing {
  EntryInfo info;
  uint64_t stored_bytes = 0;  // header + payload as stored
  std::string location;       // a path, a key name
};

class Tier {
 public:
  virtual ~Tier() = default;
  virtual std::string name() const = 0;  // "memory", "disk", "redis"
  virtual GetResult get(Level level, const Digest& key) = 0;
  virtual PutResult put(const Entry& entry) = 0;
  // Whether (level, key) holds a usable entry. The default reads and checks it; a tier that can
  // tell without copying the payload out says so faster.
  virtual bool contains(Level level, const Digest& key) {
    return get(level, key).outcome == Outcome::hit;
  }
  virtual std::vector<TierListing> list() = 0;
  // Removes every entry; returns how many.
  virtual uint64_t clear() = 0;
};

std::unique_ptr<Tier> make_memory_tier(uint64_t max_bytes);

}  // namespace zc::cache
