// Writes entries into a tier on one background thread, so that whoever hands them over does
// not wait for the write (a disk write costs more than the rest of a remote hit).
//
// Guarantees:
//  - write() queues the entry and returns; one thread, started at the first write, writes the
//    queue in order.
//  - drain() returns once every entry queued before it is written.
//  - stop() drains and ends the thread; a write() after it is done at once, on the caller's
//    thread (at exit, a thread left running into static destruction could use what is being
//    destroyed). The destructor stops.
//  - fork(): every live writer's lock is held across fork(), so the child never inherits it
//    locked by a thread it does not have, and the child's condition variable is a fresh one
//    that waits for none of its parent's threads. The child inherits the queue but not the
//    thread: its next write() or drain() starts a thread of its own, and its stop() writes
//    what is queued at once, never joining its parent's thread. An entry the parent's thread
//    was writing at the fork is the parent's to finish.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "cache/tier.h"

namespace zc::cache {

class WriteBehind {
 public:
  // Writes into `target`, which must outlive this writer.
  explicit WriteBehind(Tier& target);
  ~WriteBehind();
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  void write(Entry e);
  void drain();
  void stop();

 private:
  struct ForkGuard;
  friend struct ForkGuard;
  void loop();
  // With mu_ held: a thread of this process writes the queue (started when missing).
  void ensure_thread_locked();

  Tier& target_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> pending_;
  bool writing_ = false;  // the thread holds an entry taken off pending_
  bool stopped_ = false;
  std::unique_ptr<std::thread> thread_;
  pid_t thread_pid_ = 0;  // the process the thread runs in: a forked child's differs
};

}  // namespace zc::cache
