// The write-behind writer on its own, in front of a tier whose writes can be held up: write()
// returns before the write, drain() waits for it, stop() writes everything queued and later
// writes at once, and a forked child neither hangs on nor loses its parent's queue.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/tier.h"
#include "cache/write_behind.h"

namespace zc::cache {
namespace {

// A memory tier whose puts wait while the gate is closed, recording the thread of each. The
// gate is an atomic, polled: a put waiting at it holds no lock, so a forked child can open it.
class GatedTier final : public Tier {
 public:
  TierKind kind() const override { return TierKind::disk; }
  std::string name() const override { return "gated"; }
  GetResult get(Level level, const Digest& key) override { return inner_->get(level, key); }
  PutResult put(const Entry& e) override {
    ++waiting_;
    while (!open_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    --waiting_;
    {
      std::lock_guard lock(mu_);
      writers_.push_back(std::this_thread::get_id());
    }
    return inner_->put(e);
  }
  std::vector<TierListing> list() override { return inner_->list(); }
  uint64_t clear() override { return inner_->clear(); }

  void set_open(bool open) { open_ = open; }
  std::vector<std::thread::id> writers() {
    std::lock_guard lock(mu_);
    return writers_;
  }
  bool holds(const Entry& e) { return inner_->contains(e.level, e.key); }
  // Returns once a put waits at the closed gate.
  void await_waiter() {
    while (waiting_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  std::unique_ptr<Tier> inner_ = make_memory_tier(0);
  std::atomic<bool> open_{true};
  std::atomic<int> waiting_{0};
  std::mutex mu_;  // guards writers_
  std::vector<std::thread::id> writers_;
};

Entry entry_of(int i) {
  Entry e;
  e.level = Level::graph;
  e.key = sha256("write behind " + std::to_string(i));
  e.payload.assign(100, static_cast<uint8_t>(i));
  return e;
}

TEST(CacheWriteBehind, WriteReturnsBeforeTheWriteAndDrainWaitsForIt) {
  GatedTier tier;
  WriteBehind writer(tier);
  tier.set_open(false);
  for (int i = 0; i < 3; ++i) writer.write(entry_of(i));  // would hang if written here
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(tier.holds(entry_of(i))) << i;
  std::atomic<bool> drained{false};
  std::thread waiter([&] {
    writer.drain();
    drained = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(drained) << "drain() returned while writes were held up";
  tier.set_open(true);
  waiter.join();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(tier.holds(entry_of(i))) << i;
  // One background thread wrote them all, none on the caller's.
  std::vector<std::thread::id> writers = tier.writers();
  ASSERT_EQ(writers.size(), 3u);
  for (auto id : writers) {
    EXPECT_EQ(id, writers[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
  writer.drain();  // nothing queued: returns at once
}

TEST(CacheWriteBehind, StopWritesTheQueueThenWritesAtOnce) {
  GatedTier tier;
  WriteBehind writer(tier);
  tier.set_open(false);
  writer.write(entry_of(1));
  writer.write(entry_of(2));
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    tier.set_open(true);
  });
  writer.stop();  // returns only once the queue is written
  opener.join();
  EXPECT_TRUE(tier.holds(entry_of(1)));
  EXPECT_TRUE(tier.holds(entry_of(2)));
  writer.write(entry_of(3));
  EXPECT_TRUE(tier.holds(entry_of(3))) << "a write after stop() is not done at once";
  EXPECT_EQ(tier.writers().back(), std::this_thread::get_id());
  writer.stop();  // again: nothing happens
}

TEST(CacheWriteBehind, DestructorWritesWhatIsQueued) {
  GatedTier tier;
  {
    WriteBehind writer(tier);
    for (int i = 0; i < 5; ++i) writer.write(entry_of(i));
  }
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(tier.holds(entry_of(i))) << i;
}

// A child forked while the parent's thread exists has the queue but not the thread.
TEST(CacheWriteBehind, ForkedChildStartsItsOwnThreadOrWritesAtOnce) {
  GatedTier tier;
  WriteBehind writer(tier);
  writer.write(entry_of(0));  // starts the thread
  writer.drain();
  pid_t child = fork();
  if (child == 0) {
    writer.write(entry_of(1));
    writer.drain();  // would hang waiting on the parent's thread
    bool ok = tier.holds(entry_of(1));
    writer.stop();
    writer.write(entry_of(2));
    ok = ok && tier.holds(entry_of(2));
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's writer is untouched by the child's.
  EXPECT_FALSE(tier.holds(entry_of(1)));
  writer.write(entry_of(3));
  writer.drain();
  EXPECT_TRUE(tier.holds(entry_of(3)));
}

// A child forked with entries still queued writes them itself when it stops.
TEST(CacheWriteBehind, ForkedChildWritesItsInheritedQueueAtStop) {
  GatedTier tier;
  WriteBehind writer(tier);
  tier.set_open(false);
  writer.write(entry_of(0));
  tier.await_waiter();        // the parent's thread took entry 0 and waits at the gate
  writer.write(entry_of(1));  // queued
  pid_t child = fork();
  if (child == 0) {
    tier.set_open(true);
    writer.stop();
    // Entry 0 is the parent's thread's to write; entry 1, queued, is the child's.
    _exit(tier.holds(entry_of(1)) && !tier.holds(entry_of(0)) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  tier.set_open(true);
  writer.drain();
  EXPECT_TRUE(tier.holds(entry_of(0)));
  EXPECT_TRUE(tier.holds(entry_of(1)));
}

}  // namespace
}  // namespace zc::cache
