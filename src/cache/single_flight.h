// Single flight across processes, for entries worth waiting for: of several processes about
// to compile one entry, one compiles and the others wait for its entry.
//
// First a lock file, <lock dir>/<level>-<key hex>.lock, under flock: processes sharing the
// directory wait for its holder (at most local_lock_ms, polling, since flock has no timeout),
// then look in the disk tier again. Then the remote tier's lock on the key, or, while another
// machine holds it, a wait for that machine's entry in the remote tier (at most
// remote_lock_ms). A lock that cannot be had (an unwritable directory, a tier without locks, a
// remote failure) means: compile without waiting. A process that dies releases its lock file
// at once; lock files are never removed (unlinking one while another process waits on it
// would let a third lock a new file of the same name, and two would compile).
//
// Safe to use from many threads; each flight is its own token.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/tier.h"

namespace zc::cache {

class SingleFlight {
 public:
  struct Options {
    std::string lock_dir;        // where lock files are made
    int local_lock_ms = 60000;   // longest wait for a lock file; 0: no local lock
    int remote_lock_ms = 60000;  // a remote lock's lifetime and longest wait; 0: no remote lock
  };
  // `disk` (null: no local lock) is looked at again once its lock is had; `remote` (null: no
  // remote lock) is asked for a lock and polled for the holder's entry. Both must outlive this.
  SingleFlight(Options options, Tier* disk, Tier* remote);

  // Judges a hit found while waiting, in `tier`: the entry to use (checked, counted, copied
  // into the faster tiers by the caller), or nullopt when it must not be used.
  using Adopt = std::function<std::optional<Entry>(Tier& tier, GetResult found)>;

  struct Flight {
    std::optional<Entry> entry;  // another process's entry, adopted: nothing to compile
    std::string token;           // the locks held, for end(); empty when none is
  };
  // Returns the entry when it appeared; otherwise the caller compiles, stores, then calls end().
  Flight begin(Level level, const Digest& key, const Adopt& adopt);
  // Releases the locks `token` holds (nothing for an empty or unknown token).
  void end(Level level, const Digest& key, const std::string& token);

 private:
  // The lock file's descriptor, locked, or -1 when it could not be had in time.
  int lock_local(Level level, const Digest& key);

  struct HeldLocks {
    int fd = -1;          // the local lock file, locked
    bool remote = false;  // the remote lock, under the flight's token
  };
  const Options options_;
  Tier* const disk_;
  Tier* const remote_;
  std::mutex mu_;
  std::vector<std::pair<std::string, HeldLocks>> held_;  // by flight token, under mu_
};

}  // namespace zc::cache
