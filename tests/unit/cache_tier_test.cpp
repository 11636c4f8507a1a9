// What every tier answers through the Tier interface alone: its kind, and the defaults of the
// capabilities only the remote tier has (no lock, per-key batched lookups, nothing to connect),
// so the cache can ask any tier without knowing which one it holds. Also the disk tier's
// presence check, which says a file is there without reading it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/tier.h"
#include "unit/test_support.h"

namespace zc::cache {
namespace {

Entry entry_of(const std::string& name, size_t size = 100) {
  Entry e;
  e.level = Level::kernel;
  e.key = sha256(name);
  e.compile_ms = 3;
  e.created_unix = 1'700'000'000;
  e.payload.assign(size, static_cast<uint8_t>(name.size()));
  return e;
}

// The memory and disk tiers, each with "present" stored and "absent" not.
std::vector<std::unique_ptr<Tier>> local_tiers() {
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(make_memory_tier(0));
  tiers.push_back(open_disk_tier({test::test_dir("cache_tier") + "/store"}));
  for (auto& t : tiers) EXPECT_TRUE(t->put(entry_of("present")).ok) << t->name();
  return tiers;
}

TEST(CacheTier, KindsAndTheirDisplayNames) {
  auto tiers = local_tiers();
  EXPECT_EQ(tiers[0]->kind(), TierKind::memory);
  EXPECT_EQ(tiers[1]->kind(), TierKind::disk);
  for (auto& t : tiers) EXPECT_EQ(t->name(), tier_kind_name(t->kind()));
  EXPECT_STREQ(tier_kind_name(TierKind::remote), "redis");
}

TEST(CacheTier, LocalTiersOfferNoLock) {
  for (auto& t : local_tiers()) {
    const Digest key = entry_of("present").key;
    EXPECT_EQ(t->try_lock(Level::kernel, key, "token", 1000), LockState::unavailable) << t->name();
    t->unlock(Level::kernel, key, "token");  // nothing to release, nothing happens
    t->connect_now();
    EXPECT_EQ(t->get(Level::kernel, key).outcome, Outcome::hit) << t->name();
  }
}

TEST(CacheTier, GetManyIsOneGetPerKeyInOrder) {
  for (auto& t : local_tiers()) {
    const std::vector<Digest> keys{entry_of("absent").key, entry_of("present").key,
                                   entry_of("absent").key};
    std::vector<GetResult> got = t->get_many(Level::kernel, keys);
    ASSERT_EQ(got.size(), 3u) << t->name();
    EXPECT_EQ(got[0].outcome, Outcome::miss) << t->name();
    ASSERT_EQ(got[1].outcome, Outcome::hit) << t->name();
    EXPECT_EQ(got[1].entry->payload, entry_of("present").payload) << t->name();
    EXPECT_EQ(got[2].outcome, Outcome::miss) << t->name();
    EXPECT_TRUE(t->get_many(Level::kernel, {}).empty()) << t->name();
  }
}

// A stat, not a read: a damaged file is still "there" (the get that follows refuses and
// removes it), and an unusable store holds nothing.
TEST(CacheTier, DiskContainsIsPresenceNotVerification) {
  const std::string dir = test::test_dir("cache_tier");
  auto disk = open_disk_tier({dir + "/store"});
  const Entry e = entry_of("damaged", 1000);
  EXPECT_FALSE(disk->contains(e.level, e.key));
  ASSERT_TRUE(disk->put(e).ok);
  EXPECT_TRUE(disk->contains(e.level, e.key));
  std::filesystem::resize_file(disk->entry_path(e.level, e.key), 10);
  EXPECT_TRUE(disk->contains(e.level, e.key));
  EXPECT_EQ(disk->get(e.level, e.key).outcome, Outcome::error);
  EXPECT_FALSE(disk->contains(e.level, e.key));

  const std::string file = dir + "/not-a-directory";
  std::ofstream(file) << "x";
  EXPECT_FALSE(open_disk_tier({file})->contains(e.level, e.key));
}

}  // namespace
}  // namespace zc::cache
