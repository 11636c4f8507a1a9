// Single flight on its own, two "processes" (two SingleFlight objects sharing one lock
// directory and store): the second waits for the first's lock, then adopts its entry from
// the disk tier; gives up at its deadline; and a remote tier without locks costs no wait.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "cache/disk_tier.h"
#include "cache/single_flight.h"
#include "unit/test_support.h"

namespace zc::cache {
namespace {

using Clock = std::chrono::steady_clock;

Entry entry_of(const std::string& name) {
  Entry e;
  e.level = Level::graph;
  e.key = sha256(name);
  e.payload.assign(10, 1);
  return e;
}

struct Store {
  std::string dir = test::test_dir("cache_single_flight");
  std::unique_ptr<DiskTier> disk = open_disk_tier({dir + "/store"});
  SingleFlight flight(int local_lock_ms, Tier* remote = nullptr) {
    return SingleFlight({dir + "/locks", local_lock_ms, 60000}, disk.get(), remote);
  }
};

// Takes any hit as it is, remembering which tier it came from.
SingleFlight::Adopt adopt_into(std::string* from) {
  return [from](Tier& tier, GetResult found) {
    *from = tier.name();
    return std::move(found.entry);
  };
}

TEST(CacheSingleFlight, TheSecondWaitsForTheFirstThenAdoptsItsEntry) {
  Store s;
  SingleFlight a = s.flight(5000), b = s.flight(5000);
  const Entry e = entry_of("waited for");
  std::string from;
  SingleFlight::Flight first = a.begin(e.level, e.key, adopt_into(&from));
  ASSERT_FALSE(first.entry);
  ASSERT_FALSE(first.token.empty());
  auto second =
      std::async(std::launch::async, [&] { return b.begin(e.level, e.key, adopt_into(&from)); });
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_TRUE(s.disk->put(e).ok);
  a.end(e.level, e.key, first.token);
  SingleFlight::Flight got = second.get();
  ASSERT_TRUE(got.entry);
  EXPECT_EQ(got.entry->payload, e.payload);
  EXPECT_TRUE(got.token.empty()) << "an adopted entry holds no lock";
  EXPECT_EQ(from, "disk");
  // Released: a third flight takes the lock at once.
  SingleFlight::Flight third = b.begin(Level::graph, entry_of("next").key, adopt_into(&from));
  EXPECT_FALSE(third.token.empty());
  b.end(Level::graph, entry_of("next").key, third.token);
}

TEST(CacheSingleFlight, AHeldLockIsWaitedForUntilTheDeadlineOnly) {
  Store s;
  SingleFlight a = s.flight(5000), b = s.flight(150);
  const Entry e = entry_of("never stored");
  std::string from;
  SingleFlight::Flight first = a.begin(e.level, e.key, adopt_into(&from));
  ASSERT_FALSE(first.token.empty());
  const auto t0 = Clock::now();
  SingleFlight::Flight second = b.begin(e.level, e.key, adopt_into(&from));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(150));
  EXPECT_FALSE(second.entry);
  EXPECT_TRUE(second.token.empty()) << "gave up: compiles holding no lock";
  b.end(e.level, e.key, second.token);  // an empty token: nothing happens
  a.end(e.level, e.key, first.token);
  a.end(e.level, e.key, first.token);  // already released: nothing happens
}

TEST(CacheSingleFlight, ARemoteTierWithoutLocksAndNoLocalLockMeanNoWait) {
  Store s;
  auto memory = make_memory_tier(0);
  SingleFlight no_local = s.flight(0, memory.get());
  const Entry e = entry_of("no locks");
  std::string from;
  SingleFlight::Flight f = no_local.begin(e.level, e.key, adopt_into(&from));
  EXPECT_FALSE(f.entry);
  EXPECT_TRUE(f.token.empty());
  EXPECT_TRUE(from.empty()) << "nothing was adopted";
}

}  // namespace
}  // namespace zc::cache
