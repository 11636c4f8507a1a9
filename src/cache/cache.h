// The tiered compile cache of this process: memory, then local disk, then a remote (Redis)
// tier. A read checks the tiers in order and copies a hit into the faster ones; a new entry
// is written through to every enabled tier. A remote hit reaches the disk tier behind the
// caller's back (one writer thread, WriteBehind, which a forked child takes over safely), so a
// start from a warm remote cache does not wait for disk writes; whatever reads the disk tier as
// a whole (export, contains, the lifetime statistics at exit) first waits for those writes.
// Every lookup is counted per level and tier and, with ZC_LOGS=cache, logged with its key's
// components.
//
// Configuration (read once, from the environment):
//   ZC_CACHE_DIR              local store; default $XDG_CACHE_HOME/zerocompile, else
//                             ~/.cache/zerocompile (never /tmp, which is lost on reboot)
//   ZC_CACHE_MAX_BYTES        size cap of the local store, least recently used evicted
//   ZC_FORCE_DISABLE_CACHES=1 no persistent tier at all (the in-process code cache stays)
//   ZC_CACHE_HMAC_KEY_FILE    key for signing and verifying bundles and remote entries
//   ZC_REMOTE_CACHE           redis://[user:password@]host[:port][/db]: the remote tier
//   ZC_REMOTE_CACHE_TTL       seconds a remote entry lives; default 0, no expiry
//   ZC_REMOTE_CACHE_READONLY=1  never write to the remote tier
//   ZC_REMOTE_CACHE_CONNECT_TIMEOUT_MS  default 200
//   ZC_REMOTE_CACHE_TIMEOUT_MS          per command, default 500
//   ZC_REMOTE_CACHE_LOCK_MS   single flight: lifetime of a compile lock and longest wait for
//                             another process's compile, default 60000; 0 turns it off
//   ZC_CACHE_LOCK_MS          single flight among processes sharing ZC_CACHE_DIR: longest wait
//                             for another process's compile, default 60000; 0 turns it off
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/bundle.h"
#include "cache/counters.h"
#include "cache/keys.h"
#include "cache/single_flight.h"
#include "cache/tier.h"
#include "cache/write_behind.h"

namespace zc::cache {

class DiskTier;

struct CacheConfig {
  bool persistent = true;  // false: ZC_FORCE_DISABLE_CACHES
  std::string dir;
  uint64_t max_bytes = 0;  // 0: no cap
  uint64_t memory_max_bytes = 256ull << 20;
  std::string hmac_key_file;
  std::string remote_url;  // empty: no remote tier
  uint64_t remote_ttl_seconds = 0;
  bool remote_read_only = false;
  int remote_connect_timeout_ms = 200;
  int remote_timeout_ms = 500;
  int remote_lock_ms = 60000;
  int local_lock_ms = 60000;

  static CacheConfig from_env();
};

class Cache {
 public:
  explicit Cache(CacheConfig config);
  ~Cache();

  // The entry stored under `key` in the fastest tier that has it, or nullopt. A stored entry
  // made for another provenance than key.provenance() (a key that missed a component, a
  // hand-edited store) is refused, counted and logged as an error. Each tier's outcome is
  // counted in the process's table and, when given, in `also` (a compile's own).
  std::optional<Entry> get(const Key& key, CounterTable* also = nullptr);
  // Stores `payload`, with key.provenance() ahead of it, under `key` in every tier. A failing
  // tier (read-only, full) is warned about once and skipped; the compile that produced the
  // payload is never affected.
  void put(const Key& key, std::vector<uint8_t> payload, double compile_ms,
           CounterTable* also = nullptr);
  // put, with the disk tier's copy written behind on the writer thread (as a remote hit's is):
  // for a small record a call makes on its way to its result, which this process holds in
  // memory and later processes read from disk. A failed disk write is not warned about; the
  // record only saves a later process some work.
  void put_behind(const Key& key, std::vector<uint8_t> payload, double compile_ms,
                  CounterTable* also = nullptr);
  // Reads the entry under `key` (nullopt when none), hands it to `merge` and stores what merge
  // returns, with no other update() of this Cache in between: for a record that gathers several
  // writers' items under one key (the size templates of one structure), which the parts of one
  // compile write side by side. Processes sharing a store may still race; the last write wins.
  void update(const Key& key,
              const std::function<std::vector<uint8_t>(const std::optional<Entry>&)>& merge,
              double compile_ms, CounterTable* also = nullptr);

  // Asks the remote tier, in one round trip, for those of `keys` (one level) that neither memory
  // nor disk holds, and keeps the answers for get(): a start that needs several entries at once
  // (the parts of a hierarchical compile) pays one round trip instead of one per entry, and the
  // lookups themselves stay as they were (get() counts and logs each). Without a remote tier,
  // or when every key is local, it does nothing.
  void prefetch(std::span<const Key> keys);

  // Single flight across processes, for entries worth waiting for. First a lock file in the
  // cache directory (<dir>/locks/<level>-<key hex>.lock, flock): processes sharing the
  // directory wait for its holder (at most ZC_CACHE_LOCK_MS), then look on disk again. Then,
  // with a remote tier, its lock on `key`, or while another machine holds it, a wait for that
  // machine's entry (at most ZC_REMOTE_CACHE_LOCK_MS). Returns the entry when it appeared
  // (judged by key.provenance(), as get() judges it); otherwise the caller compiles, puts, then
  // calls end_flight with the token (empty when no lock is held). A lock that cannot be had
  // (unwritable directory, remote failure) means: compile without waiting. A process that dies
  // releases its lock file at once.
  using Flight = SingleFlight::Flight;
  Flight begin_flight(const Key& key, CounterTable* also = nullptr);
  void end_flight(const Key& key, const std::string& token);

  // Whether a tier already holds (level, key); and an entry from elsewhere (a bundle) written
  // into every tier.
  bool contains(Level level, const Digest& key);
  void insert(Entry entry);

  void clear_memory() { memory_->clear(); }
  // Connects to the remote tier on another thread, ahead of its first lookup: the first call
  // only, and only with a remote tier (otherwise the future is empty).
  std::future<void> connect_remote_async();

  const CacheConfig& config() const { return config_; }
  DiskTier* disk() const { return disk_.get(); }  // null when persistence is off
  Tier* remote() const { return remote_.get(); }  // null without ZC_REMOTE_CACHE
  TierCounters counters(CounterKey key) const { return counters_.get(key); }
  // Every entry this process stored or hit, for bundles.
  std::vector<BundleItem> touched_items();
  // Writes this process's counters into the store's lifetime statistics (also at exit).
  void flush_lifetime_stats();
  // Returns once every remote hit queued for the disk tier is written there.
  void drain_disk_writes();
  // Drains and ends the writer thread (at exit); later remote hits are written at once.
  void stop_writer();

 private:
  // put and put_behind: the entry into every tier, the disk's copy queued on the writer thread
  // when `disk_behind`.
  void store(const Key& key, const std::vector<uint8_t>& payload, double compile_ms,
             bool disk_behind, CounterTable* also);
  // A hit under `key` found while waiting for a lock: checked, counted, copied into the faster
  // tiers.
  std::optional<Entry> adopt(Tier& tier, const Key& key, GetResult r, CounterTable* also);
  void count_lookup(CounterKey key, Outcome outcome, double saved_ms, CounterTable* also);
  void note_touched(Level level, const Digest& key);
  CacheConfig config_;
  std::unique_ptr<Tier> memory_;
  std::unique_ptr<DiskTier> disk_;
  // Remote hits on their way to disk_; null without a disk tier. Declared after disk_, so it is
  // gone before the tier it writes into.
  std::unique_ptr<WriteBehind> disk_writer_;
  std::unique_ptr<Tier> remote_;
  std::unique_ptr<SingleFlight> flights_;
  std::atomic<bool> remote_connect_started_{false};
  mutable std::mutex mu_;
  std::mutex update_mu_;  // one update() at a time
  CounterTable counters_;
  std::vector<std::pair<Level, Digest>> touched_;
  // prefetch()'s remote answers (hits and misses), each taken by the first get() of its key.
  std::vector<std::pair<std::pair<Level, Digest>, GetResult>> staged_;  // under mu_
  std::optional<GetResult> take_staged(Level level, const Digest& key);
  std::atomic<bool> warned_put_failure_{false};
};

// The process-wide cache, created from the environment on first use.
Cache& process_cache();

// Stored payloads begin with the provenance their key was made for, so an entry can be
// exported and judged (wrong build, wrong target) long after it was written.
std::vector<uint8_t> wrap_payload(const Provenance& p, std::span<const uint8_t> payload);
// Splits a stored payload; nullopt when it does not start with a provenance.
std::optional<std::pair<Provenance, std::vector<uint8_t>>> unwrap_payload(
    std::span<const uint8_t> stored);

// Every entry of the local store with its provenance (what `zc cache export` bundles).
std::vector<BundleItem> store_items(Cache& c);

}  // namespace zc::cache
