// A cache tier stores encoded entries (entry.h) by (level, key). Tiers store bytes and know no
// compiler objects. Every method is safe to call from many threads, and a tier never throws
// for a missing, corrupt or unwritable entry: those are misses or failed writes, reported
// through the result.
//
// Besides storing, a tier may offer what only some can: compile locks shared between machines,
// a batched lookup, an early connection. The defaults answer as a tier without them would (no
// lock, one lookup per key, nothing to connect), so the cache asks every tier the same way and
// never needs to know which one it holds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/entry.h"

namespace zc::cache {

enum class Outcome : uint8_t { hit, miss, error };

// What a tier is, for counting: the cache holds at most one of each.
enum class TierKind : uint8_t { memory, disk, remote };
inline constexpr TierKind kTierKinds[] = {TierKind::memory, TierKind::disk, TierKind::remote};
inline constexpr size_t kTierKindCount = std::size(kTierKinds);
// "memory", "disk", "redis": the names statistics, logs and `zc cache stats` print. The remote
// tier is shown as "redis", the only remote tier there is.
constexpr const char* tier_kind_name(TierKind k) {
  switch (k) {
    case TierKind::memory:
      return "memory";
    case TierKind::disk:
      return "disk";
    case TierKind::remote:
      return "redis";
  }
  return "unknown";
}

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

enum class LockState : uint8_t {
  acquired,     // this process compiles
  held,         // another process does: wait for its entry
  unavailable,  // no lock here (none offered, no server, an error, read-only): compile at once
};

class Tier {
 public:
  virtual ~Tier() = default;
  virtual TierKind kind() const = 0;
  virtual std::string name() const = 0;  // "memory", "disk", "redis"
  virtual GetResult get(Level level, const Digest& key) = 0;
  virtual PutResult put(const Entry& entry) = 0;
  // Whether (level, key) is stored, as cheaply as the tier can tell: a presence check that
  // need not verify the entry (the get that follows does). The default reads and checks it.
  virtual bool contains(Level level, const Digest& key) {
    return get(level, key).outcome == Outcome::hit;
  }
  virtual std::vector<TierListing> list() = 0;
  // Removes every entry; returns how many.
  virtual uint64_t clear() = 0;

  // The entries of `keys` (one level), each checked as get() checks it, in the order of
  // `keys`. A tier that can ask for many in one round trip does; the default asks one by one.
  virtual std::vector<GetResult> get_many(Level level, std::span<const Digest> keys) {
    std::vector<GetResult> out;
    out.reserve(keys.size());
    for (const Digest& k : keys) out.push_back(get(level, k));
    return out;
  }
  // A compile lock on (level, key) shared by every process using the tier, taken under
  // `token` and expiring by itself after `lock_ms` (so a holder that dies blocks nobody for
  // longer). The default offers none.
  virtual LockState try_lock(Level /*level*/, const Digest& /*key*/, const std::string& /*token*/,
                             int /*lock_ms*/) {
    return LockState::unavailable;
  }
  // Releases the lock only while `token` still holds it: once expired it may be another's.
  virtual void unlock(Level /*level*/, const Digest& /*key*/, const std::string& /*token*/) {}
  // Connects now rather than at the first lookup, so a start can overlap the connection with
  // other work. A failure counts as any other would. The default has nothing to connect.
  virtual void connect_now() {}
};

std::unique_ptr<Tier> make_memory_tier(uint64_t max_bytes);

}  // namespace zc::cache
