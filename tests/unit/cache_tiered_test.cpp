// The tiered Cache on a local store: entries are judged by the provenance their key was made
// for (on a plain lookup and on the lock-wait path), and lookups and stores are counted per
// level and tier kind, the disk tier's counts flowing into the store's lifetime statistics once.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cache/disk_tier.h"
#include "unit/test_support.h"
#include "util/log.h"

namespace zc::cache {
namespace {

using test::contains;

const Provenance kOurs{"build-0123456789abcdef", "target-a", "toolchain-a"};

CacheConfig local_config() {
  CacheConfig c;
  c.dir = test::test_dir("cache_tiered");
  return c;
}

Key graph_key(const std::string& graph) {
  Key k(Level::graph);
  k.add("graph", graph).made_for(kOurs);
  return k;
}

// Stores under `key` in the disk tier alone a payload that says `made_for` made it.
void plant(Cache& c, const Key& key, const Provenance& made_for, std::vector<uint8_t> payload) {
  Entry e;
  e.level = key.level();
  e.key = key.digest();
  e.compile_ms = 7;
  e.payload = wrap_payload(made_for, payload);
  ASSERT_TRUE(c.disk()->put(e).ok);
  c.clear_memory();
}

// The disk tier holds `payload` under `key`, wrapped with kOurs.
void expect_on_disk(Cache& c, const Key& key, const std::vector<uint8_t>& payload) {
  GetResult stored = c.disk()->get(key.level(), key.digest());
  ASSERT_EQ(stored.outcome, Outcome::hit);
  auto unwrapped = unwrap_payload(stored.entry->payload);
  ASSERT_TRUE(unwrapped);
  EXPECT_EQ(unwrapped->first, kOurs);
  EXPECT_EQ(unwrapped->second, payload);
}

// Runs `f` with cache logging on; returns what it logged.
template <class F>
std::string cache_log_of(F&& f) {
  logging::set_enabled(logging::Topic::cache, true);
  ::testing::internal::CaptureStderr();
  f();
  std::string log = ::testing::internal::GetCapturedStderr();
  logging::set_enabled(logging::Topic::cache, false);
  return log;
}

TEST(CacheProvenance, MadeForAppendsItsNonEmptyFieldsInOrder) {
  Key graph = graph_key("g");
  EXPECT_EQ(graph.describe(),
            "graph=g build=build-0123456789abcdef target=target-a toolchain=toolchain-a");
  EXPECT_EQ(graph.provenance(), kOurs);
  Key kernel(Level::kernel);
  kernel.add("source", "s").made_for({"", "target-a", "toolchain-a"});
  EXPECT_EQ(kernel.describe(), "source=s target=target-a toolchain=toolchain-a");
  Key lowering(Level::lowering);
  lowering.add("graph", "g").made_for({"build-b", "", ""});
  EXPECT_EQ(lowering.describe(), "graph=g build=build-b");
  // The same components added by hand give the same digest: made_for changes no key.
  Key by_hand(Level::graph);
  by_hand.add("graph", "g")
      .add("build", kOurs.build_id)
      .add("target", kOurs.target)
      .add("toolchain", kOurs.toolchain);
  EXPECT_EQ(by_hand.digest(), graph.digest());
  EXPECT_EQ(Key(Level::graph).provenance(), Provenance{});
}

TEST(CacheProvenance, PutWrapsThePayloadWithTheKeysProvenance) {
  Cache c(local_config());
  const Key key = graph_key("wrapped");
  const std::vector<uint8_t> payload{1, 2, 3, 4};
  c.put(key, payload, 5);
  expect_on_disk(c, key, payload);
  c.clear_memory();
  std::optional<Entry> hit = c.get(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->payload, payload);
}

// update: threads that each add their byte to one key's list lose none of them (as the size
// templates of a compile's parts, written side by side, must not), and what they stored is on
// disk for a later process.
TEST(CacheProvenance, UpdatesOfOneKeyFromManyThreadsKeepEveryWritersItem) {
  Cache c(local_config());
  const Key key = graph_key("gathered");
  constexpr int kThreads = 8, kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        c.update(
            key,
            [&](const std::optional<Entry>& now) {
              std::vector<uint8_t> list = now ? now->payload : std::vector<uint8_t>{};
              list.push_back(static_cast<uint8_t>(t));
              return list;
            },
            1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::optional<Entry> got = c.get(key);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->payload.size(), static_cast<size_t>(kThreads * kEach));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(std::count(got->payload.begin(), got->payload.end(), static_cast<uint8_t>(t)), kEach)
        << "thread " << t;
  }
  expect_on_disk(c, key, got->payload);
}

// put_behind: the entry is in memory at once, the same bytes put() would store reach the disk
// once the writer drains (a bundle's list of touched entries drains it), and a later process
// (a fresh Cache on the directory) reads it.
TEST(CacheProvenance, PutBehindIsInMemoryAtOnceAndOnDiskOnceWritten) {
  const Key key = graph_key("behind");
  const std::vector<uint8_t> payload{5, 6, 7};
  const CacheConfig config = local_config();
  {
    Cache c(config);
    c.put_behind(key, payload, 3);
    std::optional<Entry> hit = c.get(key);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->payload, payload);
    bool listed = false;
    for (const BundleItem& item : c.touched_items()) {
      listed = listed || (item.entry.key == key.digest() && item.entry.level == key.level());
    }
    EXPECT_TRUE(listed);
    expect_on_disk(c, key, payload);
  }
  Cache later(config);
  std::optional<Entry> hit = later.get(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->payload, payload);
}

// The digest covers the provenance, so only a stored entry that lies about it (a key that
// missed a component, a hand-edited store) can differ: it is refused as an error, with why.
TEST(CacheProvenance, AnEntryMadeForAnotherProvenanceIsAnErrorWithTheReason) {
  struct Case {
    Provenance made_for;
    std::string reason;
  };
  const std::vector<Case> cases{
      {{"build-fedcba9876543210", kOurs.target, kOurs.toolchain},
       "made by another zc build (build-fedcba)"},
      {{kOurs.build_id, "target-b", kOurs.toolchain}, "made for another target"},
      {{kOurs.build_id, kOurs.target, "toolchain-b"}, "made by another toolchain"},
      {{kOurs.build_id, "", ""}, "made for another target"},
  };
  for (const Case& k : cases) {
    Cache c(local_config());
    const Key key = graph_key("refused");
    plant(c, key, k.made_for, {9, 9});
    std::string log = cache_log_of([&] { EXPECT_FALSE(c.get(key)) << k.reason; });
    EXPECT_TRUE(contains(log, "lookup graph disk error (" + k.reason + ")")) << log;
    EXPECT_EQ(c.counters({Level::graph, TierKind::disk}).errors, 1) << k.reason;
    EXPECT_EQ(c.counters({Level::graph, TierKind::disk}).hits, 0) << k.reason;
  }
  // A payload with no provenance at all is refused too.
  Cache c(local_config());
  const Key key = graph_key("bare");
  Entry bare;
  bare.level = key.level();
  bare.key = key.digest();
  bare.payload = {1, 2, 3};
  ASSERT_TRUE(c.disk()->put(bare).ok);
  std::string log = cache_log_of([&] { EXPECT_FALSE(c.get(key)); });
  EXPECT_TRUE(contains(log, "error (no provenance)")) << log;
}

// After a wait for another process's compile, the entry it stored is judged the same way.
TEST(CacheProvenance, TheLockWaitPathJudgesTheEntryByTheKey) {
  Cache c(local_config());
  const Key good = graph_key("adopted"), bad = graph_key("not adopted");
  plant(c, good, kOurs, {1});
  plant(c, bad, {kOurs.build_id, "target-b", kOurs.toolchain}, {2});

  Cache::Flight f = c.begin_flight(good);
  ASSERT_TRUE(f.entry);
  EXPECT_EQ(f.entry->payload, std::vector<uint8_t>{1});
  EXPECT_TRUE(f.token.empty()) << "an adopted entry holds no lock";
  EXPECT_EQ(c.counters({Level::graph, TierKind::disk}).hits, 1);

  std::string log = cache_log_of([&] { f = c.begin_flight(bad); });
  EXPECT_FALSE(f.entry);
  EXPECT_FALSE(f.token.empty()) << "refused: this process compiles, holding the lock";
  EXPECT_TRUE(contains(log, "lookup graph disk error (made for another target)")) << log;
  EXPECT_EQ(c.counters({Level::graph, TierKind::disk}).errors, 1);
  c.end_flight(bad, f.token);
}

TEST(CacheCounters, CountedPerLevelAndTierKind) {
  Cache c(local_config());
  const Key key = graph_key("counted");
  EXPECT_FALSE(c.get(key));
  c.put(key, {1, 2, 3}, 40);
  ASSERT_TRUE(c.get(key));  // memory
  c.clear_memory();
  ASSERT_TRUE(c.get(key));  // disk, copied into memory
  const TierCounters memory = c.counters({Level::graph, TierKind::memory});
  const TierCounters disk = c.counters({Level::graph, TierKind::disk});
  EXPECT_EQ(memory.misses, 2);
  EXPECT_EQ(memory.hits, 1);
  EXPECT_EQ(memory.puts, 1);
  EXPECT_EQ(disk.misses, 1);
  EXPECT_EQ(disk.hits, 1);
  EXPECT_EQ(disk.puts, 1);
  EXPECT_DOUBLE_EQ(disk.saved_ms, 40);
  EXPECT_GT(disk.bytes_written, 3);
  EXPECT_EQ(c.counters({Level::kernel, TierKind::disk}).misses, 0);
  EXPECT_EQ(c.counters({Level::graph, TierKind::remote}).misses, 0) << "no remote tier";
}

TEST(CacheCounters, TheDiskTiersCountsReachTheLifetimeStatisticsOnce) {
  Cache c(local_config());
  const Key key = graph_key("lifetime");
  EXPECT_FALSE(c.get(key));
  c.put(key, {1, 2, 3}, 40);
  c.clear_memory();
  ASSERT_TRUE(c.get(key));
  c.flush_lifetime_stats();
  c.flush_lifetime_stats();  // nothing new: adds nothing
  const LifetimeCounters life = c.disk()->lifetime().at(Level::graph);
  EXPECT_EQ(life.hits, 1u);
  EXPECT_EQ(life.misses, 1u);
  EXPECT_EQ(life.puts, 1u);
  EXPECT_DOUBLE_EQ(life.compile_ms_saved, 40);
  EXPECT_TRUE(c.disk()->lifetime().at(Level::kernel).empty());
  c.clear_memory();
  ASSERT_TRUE(c.get(key));
  c.flush_lifetime_stats();
  EXPECT_EQ(c.disk()->lifetime().at(Level::graph).hits, 2u);
}

}  // namespace
}  // namespace zc::cache
