// The tiered Cache on a local store: lookups and stores are counted per level and tier kind,
// and the disk tier's counts flow into the store's lifetime statistics once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache/cache.h"
#include "cache/disk_tier.h"
#include "unit/test_support.h"

namespace zc::cache {
namespace {

CacheConfig local_config() {
  CacheConfig c;
  c.dir = test::test_dir("cache_tiered");
  return c;
}

Key graph_key(const std::string& graph) {
  Key k(Level::graph);
  k.add("graph", graph);
  return k;
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
