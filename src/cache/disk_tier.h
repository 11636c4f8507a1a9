// The local disk tier: a directory of entry files, safe for many processes at once.
//
// Layout: <root>/v1/<level>/<first 2 hex chars of key>/<key hex>.zce, one encoded entry
// (entry.h) per file; <root>/stats holds the lifetime statistics (<root>/stats.lock
// serializes their updates). Directories are created on first write with mode 0755 and files
// with 0644 (the umask applies), so a team can share a store by group permissions.
//
// Writes go to a unique temp file ("tmp." prefix, skipped by every listing) in the entry's
// own directory and are renamed over the final name. rename() is atomic, so a reader sees
// either no file, the old one or the new one, and concurrent writers of one key (which write
// identical content) are safe: the last rename wins. There is no fsync: speed is favoured,
// and a file torn by a power loss is still never taken for an entry, because every read
// verifies the header and payload checksums; it is refused, removed and recompiled.
// A writer killed mid-write leaves only a temp file, which gc() removes once it is stale.
//
// Reads verify the entry against the level and key asked for; a mismatch is an error outcome
// with a reason, the file is removed (best effort) and the event is logged under
// ZC_LOGS=cache. Nothing here throws: an unreadable, unwritable, full or misplaced store gives
// misses and failed puts with reasons.
// contains() is a stat of the entry's file: it says a file is there, not that it is intact.
//
// Eviction: a hit sets the file's mtime to now (best effort, at most once a minute per entry,
// so a read-only store still serves), making mtime the time of last use. With a cap, puts
// keep an approximate running total of the store's size (a scan at the first put, then
// additions); when it crosses the cap, the tree is rescanned (other processes write too) and
// the least recently used entries are removed until the store is at most 90% of the cap, so
// the next puts do not rescan at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/lifetime_stats.h"
#include "cache/tier.h"

namespace zc::cache {

struct DiskTierOptions {
  std::string root;
  uint64_t max_bytes = 0;  // 0: no cap
  // gc() removes temp files older than this: left by writers that were killed. A live writer
  // finishes long before.
  uint64_t stale_temp_seconds = 600;
};

struct RemovedFile {
  std::string path;
  std::string reason;  // "payload checksum mismatch", "least recently used", "stale temp file"
  uint64_t bytes = 0;
};

struct VerifyReport {
  uint64_t checked = 0;  // entry files read
  uint64_t ok = 0;
  std::vector<RemovedFile> removed;
};

struct GcReport {
  uint64_t bytes_before = 0;  // entries only (temp files excluded)
  uint64_t bytes_after = 0;
  uint64_t entries_evicted = 0;
  uint64_t temp_files_removed = 0;
  std::vector<RemovedFile> removed;
};

class DiskTier : public Tier {
 public:
  virtual const std::string& root() const = 0;
  // Where an entry of (level, key) is stored, whether or not it exists.
  virtual std::string entry_path(Level level, const Digest& key) const = 0;

  // Reads and fully checks every entry; removes the bad ones and says why.
  virtual VerifyReport verify() = 0;
  // Removes stale temp files, then evicts least recently used entries while the store is over
  // its cap (down to 90% of it).
  virtual GcReport gc() = 0;
  // Bytes of all entries as stored (a scan).
  virtual uint64_t total_bytes() = 0;

  // Merges `delta` into <root>/stats under a lock, so concurrent processes lose no counts. A
  // store that cannot be written logs the failure and drops the delta.
  virtual void add_lifetime(const LifetimeDelta& delta) = 0;
  // The store's lifetime statistics; zeros when there are none yet. A corrupt statistics
  // file reads as zeros (and is replaced at the next add_lifetime), logged.
  virtual LifetimeStats lifetime() = 0;
  // Zeroes the lifetime statistics.
  virtual void reset_lifetime() = 0;
};

// Opens (does not create: the directories are made at the first write) a store at
// options.root. Never fails: a root that cannot be used makes every get a miss and every put
// a failure, each with a reason naming the cause.
std::unique_ptr<DiskTier> open_disk_tier(const DiskTierOptions& options);

}  // namespace zc::cache
