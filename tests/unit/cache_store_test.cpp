// The entry format and the memory and disk tiers: round trips, every kind of corruption,
// eviction, verification, failing writes, and many processes sharing one store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/entry.h"
#include "cache/lifetime_stats.h"
#include "cache/tier.h"
#include "unit/test_support.h"

namespace {

using zc::test::contains;

namespace fs = std::filesystem;
using namespace zc::cache;
using zc::Digest;

std::string test_dir() {
  return zc::test::test_dir("cache_store");
}

Digest key_of(int i) {
  return zc::sha256("key " + std::to_string(i));
}

Entry make_entry(int i, size_t size, Level level = Level::kernel) {
  Entry e;
  e.level = level;
  e.key = key_of(i);
  e.compile_ms = 12.5 + i;
  e.created_unix = 1'700'000'000 + static_cast<uint64_t>(i);
  e.payload.resize(size);
  for (size_t j = 0; j < size; ++j) e.payload[j] = static_cast<uint8_t>((j * 31 + i * 7) & 0xff);
  return e;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_bytes(const std::string& path, std::span<const uint8_t> b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void set_mtime(const std::string& path, int64_t seconds_ago) {
  timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = ::time(nullptr) - seconds_ago;
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, 0), 0) << path;
}

bool same_entry(const Entry& a, const Entry& b) {
  return a.level == b.level && a.key == b.key && a.compile_ms == b.compile_ms &&
         a.created_unix == b.created_unix && a.payload == b.payload;
}

std::vector<std::string> temp_files(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->path().filename().string().starts_with("tmp.")) out.push_back(it->path().string());
  }
  return out;
}

// Runs `child` in a forked process; returns its exit status (or -signal).
template <class F>
int run_in_child(F&& child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = child();
    } catch (...) {
      code = 99;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// ---------------------------------------------------------------------------------------------
// Entry format

TEST(CacheEntry, RoundTrip) {
  for (size_t size : {0, 1, 1000, 100'000}) {
    Entry e = make_entry(1, size, Level::lowering);
    std::vector<uint8_t> bytes = encode_entry(e);
    ASSERT_EQ(bytes.size(), kEntryHeaderSize + size);
    auto header = encode_entry_header(e);
    EXPECT_TRUE(std::equal(header.begin(), header.end(), bytes.begin()));
    std::string why;
    auto d = decode_entry(bytes, Level::lowering, &e.key, &why);
    ASSERT_TRUE(d) << why;
    EXPECT_TRUE(same_entry(*d, e));
    auto info = peek_entry(std::span(bytes).first(kEntryHeaderSize), &why);
    ASSERT_TRUE(info) << why;
    EXPECT_EQ(info->payload_size, size);
    EXPECT_EQ(info->key, e.key);
    EXPECT_EQ(info->level, Level::lowering);
    EXPECT_EQ(info->compile_ms, e.compile_ms);
    // No expectations: still verified.
    EXPECT_TRUE(decode_entry(bytes, std::nullopt, nullptr, nullptr));
  }
}

TEST(CacheEntry, LevelNames) {
  for (Level l : kLevels) EXPECT_EQ(level_from_name(level_name(l)), l);
  EXPECT_FALSE(level_from_name("code"));
  EXPECT_STREQ(level_name(Level::graph), "graph");
}

TEST(CacheEntry, EveryHeaderByteFlipIsRefused) {
  Entry e = make_entry(2, 300);
  const std::vector<uint8_t> good = encode_entry(e);
  for (size_t i = 0; i < kEntryHeaderSize; ++i) {
    for (uint8_t mask : {0x01, 0x80}) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= mask;
      std::string why;
      EXPECT_FALSE(decode_entry(bad, Level::kernel, &e.key, &why)) << "byte " << i;
      EXPECT_FALSE(why.empty()) << "byte " << i;
      std::string peek_why;
      EXPECT_FALSE(peek_entry(bad, &peek_why)) << "byte " << i;
    }
  }
}

TEST(CacheEntry, PayloadByteFlipIsRefused) {
  Entry e = make_entry(3, 64);
  const std::vector<uint8_t> good = encode_entry(e);
  for (size_t i = kEntryHeaderSize; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x10;
    std::string why;
    EXPECT_FALSE(decode_entry(bad, Level::kernel, &e.key, &why)) << "byte " << i;
    EXPECT_EQ(why, "payload checksum mismatch");
    EXPECT_TRUE(peek_entry(bad, &why)) << "peek does not read the payload";
  }
}

TEST(CacheEntry, TruncationAndTrailingData) {
  Entry e = make_entry(4, 500);
  const std::vector<uint8_t> good = encode_entry(e);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{8}, kEntryHeaderSize - 1, kEntryHeaderSize,
                     kEntryHeaderSize + 1, good.size() - 1}) {
    std::string why;
    EXPECT_FALSE(decode_entry(std::span(good).first(cut), Level::kernel, &e.key, &why)) << cut;
    EXPECT_TRUE(contains(why, cut == 0 ? "empty" : "truncated")) << cut << ": " << why;
  }
  std::string why;
  decode_entry(std::span(good).first(kEntryHeaderSize + 100), Level::kernel, &e.key, &why);
  EXPECT_EQ(why, "truncated: payload 100 of 500 bytes");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_FALSE(decode_entry(longer, Level::kernel, &e.key, &why));
  EXPECT_EQ(why, "trailing data: 1 bytes after the payload");
}

TEST(CacheEntry, WrongLevelKeyOrVersion) {
  Entry e = make_entry(5, 10);
  std::vector<uint8_t> bytes = encode_entry(e);
  std::string why;
  EXPECT_FALSE(decode_entry(bytes, Level::graph, &e.key, &why));
  EXPECT_EQ(why, "stored as level kernel, expected graph");
  Digest other = key_of(6);
  EXPECT_FALSE(decode_entry(bytes, Level::kernel, &other, &why));
  EXPECT_TRUE(contains(why, "stored under another key")) << why;
  bytes[8] = 2;  // format version
  EXPECT_FALSE(decode_entry(bytes, Level::kernel, &e.key, &why));
  EXPECT_TRUE(contains(why, "newer")) << why;
  bytes[0] = 'X';
  EXPECT_FALSE(decode_entry(bytes, std::nullopt, nullptr, &why));
  EXPECT_TRUE(contains(why, "magic")) << why;
}

// ---------------------------------------------------------------------------------------------
// Memory tier

TEST(CacheMemory, PutGetMiss) {
  auto t = make_memory_tier(0);
  EXPECT_EQ(t->name(), "memory");
  Entry e = make_entry(1, 100);
  EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::miss);
  ASSERT_TRUE(t->put(e).ok);
  GetResult r = t->get(Level::kernel, e.key);
  ASSERT_EQ(r.outcome, Outcome::hit);
  EXPECT_TRUE(same_entry(*r.entry, e));
  EXPECT_EQ(t->get(Level::graph, e.key).outcome, Outcome::miss) << "levels are separate";
  ASSERT_EQ(t->list().size(), 1u);
  EXPECT_EQ(t->list()[0].stored_bytes, kEntryHeaderSize + 100);
  EXPECT_EQ(t->clear(), 1u);
  EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::miss);
}

TEST(CacheMemory, LruEvictionByPayloadBytes) {
  auto t = make_memory_tier(3000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t->put(make_entry(i, 1000)).ok);
  EXPECT_EQ(t->get(Level::kernel, key_of(0)).outcome, Outcome::hit);  // 0 is now the newest
  ASSERT_TRUE(t->put(make_entry(3, 1000)).ok);
  EXPECT_EQ(t->get(Level::kernel, key_of(1)).outcome, Outcome::miss);
  for (int i : {0, 2, 3}) EXPECT_EQ(t->get(Level::kernel, key_of(i)).outcome, Outcome::hit) << i;
  // Replacing an entry does not count it twice.
  ASSERT_TRUE(t->put(make_entry(3, 1000)).ok);
  EXPECT_EQ(t->list().size(), 3u);
  PutResult big = t->put(make_entry(9, 3001));
  EXPECT_FALSE(big.ok);
  EXPECT_TRUE(contains(big.reason, "exceeds")) << big.reason;
}

TEST(CacheMemory, ManyThreads) {
  auto t = make_memory_tier(20'000);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; i < 2000; ++i) {
        int k = (i * 7 + th) % 40;
        if (i % 3 == 0) {
          t->put(make_entry(k, 500 + k));
        } else {
          GetResult r = t->get(Level::kernel, key_of(k));
          if (r.outcome == Outcome::hit && !same_entry(*r.entry, make_entry(k, 500 + k))) ++bad;
          if (r.outcome == Outcome::error) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  uint64_t total = 0;
  for (const auto& l : t->list()) total += l.info.payload_size;
  EXPECT_LE(total, 20'000u);
}

// ---------------------------------------------------------------------------------------------
// Disk tier

TEST(CacheDisk, PutGetLayout) {
  std::string root = test_dir() + "/store";
  auto t = open_disk_tier({root});
  EXPECT_EQ(t->name(), "disk");
  Entry e = make_entry(1, 1000);
  EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::miss);
  PutResult p = t->put(e);
  ASSERT_TRUE(p.ok) << p.reason;
  std::string h = zc::hex(e.key);
  std::string path = root + "/v1/kernel/" + h.substr(0, 2) + "/" + h + ".zce";
  EXPECT_EQ(t->entry_path(Level::kernel, e.key), path);
  EXPECT_EQ(read_bytes(path), encode_entry(e));
  EXPECT_TRUE(temp_files(root).empty());
  GetResult r = t->get(Level::kernel, e.key);
  ASSERT_EQ(r.outcome, Outcome::hit) << r.reason;
  EXPECT_TRUE(same_entry(*r.entry, e));
  EXPECT_EQ(t->get(Level::graph, e.key).outcome, Outcome::miss);
  // Overwriting is fine (many writers write identical content).
  ASSERT_TRUE(t->put(e).ok);
  auto listing = t->list();
  ASSERT_EQ(listing.size(), 1u);
  EXPECT_EQ(listing[0].location, path);
  EXPECT_EQ(listing[0].info.key, e.key);
  EXPECT_EQ(listing[0].stored_bytes, kEntryHeaderSize + 1000);
  EXPECT_EQ(t->total_bytes(), kEntryHeaderSize + 1000);
  EXPECT_EQ(t->clear(), 1u);
  EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::miss);
}

// Each corruption of a stored file is an error with a reason, the file is removed, and the
// next put stores the entry again.
TEST(CacheDisk, CorruptFilesAreErrorsAndRemoved) {
  std::string root = test_dir();
  auto t = open_disk_tier({root});
  const Entry e = make_entry(1, 2000);
  const Entry other = make_entry(2, 2000);
  const std::string path = t->entry_path(Level::kernel, e.key);
  const std::vector<uint8_t> good = encode_entry(e);

  struct Case {
    std::string name;
    std::function<void()> corrupt;
    std::string reason_part;
  };
  std::vector<Case> cases = {
      {"truncated", [&] { fs::resize_file(path, good.size() - 1); }, "truncated"},
      {"truncated header", [&] { fs::resize_file(path, 50); }, "truncated"},
      {"payload flip",
       [&] {
         auto b = good;
         b[kEntryHeaderSize + 1000] ^= 1;
         write_bytes(path, b);
       },
       "payload checksum"},
      {"empty", [&] { write_bytes(path, {}); }, "empty"},
      {"trailing garbage",
       [&] {
         auto b = good;
         b.insert(b.end(), {1, 2, 3});
         write_bytes(path, b);
       },
       "trailing data"},
      {"directory",
       [&] {
         fs::remove(path);
         fs::create_directories(path + "/inner");
       },
       "directory"},
      {"fifo",
       [&] {
         fs::remove(path);
         ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
       },
       "not a regular file"},
      {"another key's entry", [&] { write_bytes(path, encode_entry(other)); }, "another key"},
      {"another level's entry",
       [&] {
         Entry g = e;
         g.level = Level::graph;
         write_bytes(path, encode_entry(g));
       },
       "stored as level graph"},
  };
  for (size_t i = 0; i < kEntryHeaderSize; ++i) {
    cases.push_back({"header byte " + std::to_string(i),
                     [&, i] {
                       auto b = good;
                       b[i] ^= 0x04;
                       write_bytes(path, b);
                     },
                     ""});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(t->put(e).ok);
    c.corrupt();
    GetResult r = t->get(Level::kernel, e.key);
    EXPECT_EQ(r.outcome, Outcome::error);
    EXPECT_FALSE(r.entry);
    EXPECT_FALSE(r.reason.empty());
    EXPECT_TRUE(contains(r.reason, c.reason_part)) << r.reason;
    EXPECT_FALSE(fs::exists(path)) << "the bad file is removed";
    EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::miss);
  }
  // The store still works.
  ASSERT_TRUE(t->put(e).ok);
  EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::hit);
  // A directory squatting on the name does not block a put.
  fs::remove(path);
  fs::create_directories(path);
  ASSERT_TRUE(t->put(e).ok);
  EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::hit);
}

TEST(CacheDisk, LruEvictionByMtime) {
  std::string root = test_dir();
  const uint64_t stored = kEntryHeaderSize + 1000;
  auto t = open_disk_tier({root, 5 * stored});
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(t->put(make_entry(i, 1000)).ok);
    set_mtime(t->entry_path(Level::kernel, key_of(i)), 1000 - i * 100);  // 0 is oldest
  }
  EXPECT_EQ(t->total_bytes(), 5 * stored);
  // A hit makes 0 the most recently used.
  ASSERT_EQ(t->get(Level::kernel, key_of(0)).outcome, Outcome::hit);
  // Over the cap: the least recently used go until the store is at most 90% of the cap.
  ASSERT_TRUE(t->put(make_entry(5, 1000)).ok);
  for (int i : {1, 2}) EXPECT_EQ(t->get(Level::kernel, key_of(i)).outcome, Outcome::miss) << i;
  for (int i : {0, 3, 4, 5}) EXPECT_EQ(t->get(Level::kernel, key_of(i)).outcome, Outcome::hit) << i;
  EXPECT_LE(t->total_bytes(), 5 * stored);
}

TEST(CacheDisk, GcEvictsToCapAndRemovesStaleTemps) {
  std::string root = test_dir();
  const uint64_t stored = kEntryHeaderSize + 1000;
  {
    auto uncapped = open_disk_tier({root});
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(uncapped->put(make_entry(i, 1000)).ok);
      set_mtime(uncapped->entry_path(Level::kernel, key_of(i)), 2000 - i * 100);
    }
  }
  std::string shard =
      fs::path(open_disk_tier({root})->entry_path(Level::kernel, key_of(0))).parent_path().string();
  write_bytes(shard + "/tmp.111.1.0", std::vector<uint8_t>(300, 7));
  set_mtime(shard + "/tmp.111.1.0", 3600);
  write_bytes(shard + "/tmp.222.1.0", std::vector<uint8_t>(300, 7));  // a live writer's
  write_bytes(root + "/tmp.stats.333.1", std::vector<uint8_t>(10, 7));
  set_mtime(root + "/tmp.stats.333.1", 3600);
  // A compiler memo write cut short (toolchain/compiler.h), and a memo, which stays.
  fs::create_directories(root + "/toolchain");
  write_bytes(root + "/toolchain/tmp.zc_1_0_0123456789abcdef", std::vector<uint8_t>(10, 7));
  set_mtime(root + "/toolchain/tmp.zc_1_0_0123456789abcdef", 3600);
  write_bytes(root + "/toolchain/cxx-0123", std::vector<uint8_t>(10, 7));
  set_mtime(root + "/toolchain/cxx-0123", 3600);

  auto t = open_disk_tier({root, 5 * stored});
  GcReport rep = t->gc();
  EXPECT_EQ(rep.temp_files_removed, 3u);
  EXPECT_FALSE(fs::exists(root + "/toolchain/tmp.zc_1_0_0123456789abcdef"));
  EXPECT_TRUE(fs::exists(root + "/toolchain/cxx-0123"));
  EXPECT_EQ(rep.bytes_before, 10 * stored);
  EXPECT_LE(rep.bytes_after, 5 * stored * 9 / 10);
  EXPECT_EQ(rep.entries_evicted, 6u);
  EXPECT_FALSE(fs::exists(shard + "/tmp.111.1.0"));
  EXPECT_TRUE(fs::exists(shard + "/tmp.222.1.0"));
  EXPECT_FALSE(fs::exists(root + "/tmp.stats.333.1"));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(t->get(Level::kernel, key_of(i)).outcome, i < 6 ? Outcome::miss : Outcome::hit) << i;
  }
  EXPECT_EQ(t->total_bytes(), rep.bytes_after);
}

TEST(CacheDisk, VerifyRemovesExactlyTheBadEntries) {
  std::string root = test_dir();
  auto t = open_disk_tier({root});
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(t->put(make_entry(i, 500, kLevels[i % 4])).ok);
  std::set<std::string> bad;
  std::string p1 = t->entry_path(kLevels[1], key_of(1));
  auto b = read_bytes(p1);
  b[kEntryHeaderSize + 3] ^= 1;
  write_bytes(p1, b);
  bad.insert(p1);
  std::string p2 = t->entry_path(kLevels[2], key_of(2));
  fs::resize_file(p2, 100);
  bad.insert(p2);
  std::string p3 = fs::path(p2).parent_path().string() + "/not-a-key.zce";
  write_bytes(p3, encode_entry(make_entry(3, 10)));
  bad.insert(p3);
  // Entry 4's file under entry 0's name: a stored-under-another-key error.
  std::string p4 = t->entry_path(kLevels[0], key_of(100));
  fs::create_directories(fs::path(p4).parent_path());
  fs::copy_file(t->entry_path(kLevels[0], key_of(4)), p4);
  bad.insert(p4);
  write_bytes(fs::path(p1).parent_path().string() + "/tmp.1.2.3", std::vector<uint8_t>(5, 0));

  VerifyReport rep = t->verify();
  EXPECT_EQ(rep.checked, 8u);  // the temp file is not an entry
  EXPECT_EQ(rep.ok, 4u);
  std::set<std::string> removed;
  for (const auto& r : rep.removed) {
    removed.insert(r.path);
    EXPECT_FALSE(r.reason.empty()) << r.path;
  }
  EXPECT_EQ(removed, bad);
  for (const auto& p : bad) EXPECT_FALSE(fs::exists(p)) << p;
  for (int i : {0, 3, 4, 5}) {
    EXPECT_EQ(t->get(kLevels[i % 4], key_of(i)).outcome, Outcome::hit) << i;
  }
  EXPECT_TRUE(t->verify().removed.empty());
}

TEST(CacheDisk, RootIsARegularFile) {
  std::string dir = test_dir();
  write_bytes(dir + "/file", std::vector<uint8_t>{1, 2, 3});
  for (std::string root : {dir + "/file", dir + "/file/sub"}) {
    SCOPED_TRACE(root);
    auto t = open_disk_tier({root});
    Entry e = make_entry(1, 100);
    PutResult p = t->put(e);
    EXPECT_FALSE(p.ok);
    EXPECT_TRUE(contains(p.reason, "not a directory") || contains(p.reason, "ENOTDIR")) << p.reason;
    GetResult r = t->get(Level::kernel, e.key);
    EXPECT_EQ(r.outcome, Outcome::miss);
    EXPECT_TRUE(t->list().empty());
    EXPECT_TRUE(t->verify().removed.empty());
    EXPECT_EQ(t->gc().entries_evicted, 0u);
    LifetimeDelta d;
    d.add(Level::kernel, 1, 0, 0, 0, 0);
    t->add_lifetime(d);
    EXPECT_EQ(t->lifetime().total().hits, 0u);
  }
  EXPECT_EQ(read_bytes(dir + "/file"), (std::vector<uint8_t>{1, 2, 3}));
}

// As root, permissions do not stop writes, so the child drops to an unprivileged user first.
TEST(CacheDisk, ReadOnlyStoreServesHitsAndRefusesPuts) {
  std::string root = test_dir() + "/store";
  Entry e = make_entry(1, 1000);
  {
    auto t = open_disk_tier({root});
    ASSERT_TRUE(t->put(e).ok);
    set_mtime(t->entry_path(Level::kernel, e.key), 3600);  // a hit will try to touch it
  }
  for (auto it = fs::recursive_directory_iterator(root); it != fs::end(it); ++it) {
    if (it->is_directory()) fs::permissions(it->path(), fs::perms(0555));
  }
  fs::permissions(root, fs::perms(0555));
  int status = run_in_child([&] {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 77;
    auto t = open_disk_tier({root});
    PutResult p = t->put(make_entry(2, 1000));
    if (p.ok || !contains(p.reason, "EACCES")) return 2;
    if (t->put(e).ok) return 3;  // even where the shard directory exists
    GetResult r = t->get(Level::kernel, e.key);
    if (r.outcome != Outcome::hit || !same_entry(*r.entry, e)) return 4;
    LifetimeDelta d;
    d.add(Level::kernel, 1, 0, 0, 0, 0);
    t->add_lifetime(d);  // dropped with a log line, no crash
    return 0;
  });
  fs::permissions(root, fs::perms(0755));
  for (auto it = fs::recursive_directory_iterator(root); it != fs::end(it); ++it) {
    if (it->is_directory()) fs::permissions(it->path(), fs::perms(0755));
  }
  if (status == 77) GTEST_SKIP() << "cannot drop root privileges here";
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(temp_files(root).empty());
}

// A write that fails midway (the file size limit stands in for a full disk, which cannot be
// made without mounting) leaves neither an entry nor a temp file.
TEST(CacheDisk, FailedWriteLeavesNothing) {
  std::string root = test_dir();
  auto t = open_disk_tier({root});
  Entry e = make_entry(1, 100'000);
  int status = run_in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 77;
    PutResult p = t->put(e);
    if (p.ok) return 2;
    if (!contains(p.reason, "EFBIG")) return 3;
    return 0;
  });
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(temp_files(root).empty());
  EXPECT_FALSE(fs::exists(t->entry_path(Level::kernel, e.key)));
  EXPECT_EQ(t->get(Level::kernel, e.key).outcome, Outcome::miss);
}

TEST(CacheDisk, LifetimeStatsMergeAcrossProcesses) {
  std::string root = test_dir();
  {
    auto t = open_disk_tier({root});
    EXPECT_EQ(t->lifetime().total().hits, 0u);
  }
  constexpr int kProcs = 4, kAdds = 50;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto t = open_disk_tier({root});
      for (int i = 0; i < kAdds; ++i) {
        LifetimeDelta d;
        d.add(Level::kernel, 1, 2, 0, 1, 1.5, 100);
        d.add(Level::graph, 0, 0, 1, 0, 0);
        t->add_lifetime(d);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  // And two threads of this process with their own tiers.
  std::vector<std::thread> threads;
  for (int th = 0; th < 2; ++th) {
    threads.emplace_back([&] {
      auto t = open_disk_tier({root});
      for (int i = 0; i < kAdds; ++i) {
        LifetimeDelta d;
        d.add(Level::kernel, 1, 2, 0, 1, 1.5, 100);
        d.add(Level::graph, 0, 0, 1, 0, 0);
        t->add_lifetime(d);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto t = open_disk_tier({root});
  LifetimeStats s = t->lifetime();
  const uint64_t n = (kProcs + 2) * kAdds;
  EXPECT_EQ(s.at(Level::kernel).hits, n);
  EXPECT_EQ(s.at(Level::kernel).misses, 2 * n);
  EXPECT_EQ(s.at(Level::kernel).puts, n);
  EXPECT_EQ(s.at(Level::kernel).bytes_written, 100 * n);
  EXPECT_DOUBLE_EQ(s.at(Level::kernel).compile_ms_saved, 1.5 * n);
  EXPECT_EQ(s.at(Level::graph).errors, n);
  EXPECT_EQ(s.total().hits, n);
  EXPECT_GT(s.zeroed_unix, 0u);
  std::string json = s.to_json();
  EXPECT_TRUE(contains(json, "\"kernel\":{\"hits\":" + std::to_string(n))) << json;
  EXPECT_TRUE(contains(s.to_table(), "kernel")) << s.to_table();
  t->reset_lifetime();
  EXPECT_EQ(t->lifetime().total().hits, 0u);
}

TEST(CacheDisk, CorruptStatsFileIsReset) {
  std::string root = test_dir();
  auto t = open_disk_tier({root});
  LifetimeDelta d;
  d.add(Level::autotune, 5, 0, 0, 0, 0);
  t->add_lifetime(d);
  EXPECT_EQ(t->lifetime().at(Level::autotune).hits, 5u);
  auto bytes = read_bytes(root + "/stats");
  ASSERT_EQ(bytes.size(), kLifetimeStatsFileSize);
  bytes[40] ^= 1;
  write_bytes(root + "/stats", bytes);
  EXPECT_EQ(t->lifetime().total().hits, 0u);
  t->add_lifetime(d);
  EXPECT_EQ(t->lifetime().at(Level::autotune).hits, 5u);
  write_bytes(root + "/stats", std::vector<uint8_t>{1, 2});
  EXPECT_EQ(t->lifetime().total().hits, 0u);
  fs::remove(root + "/stats");
  fs::create_directory(root + "/stats");
  EXPECT_EQ(t->lifetime().total().hits, 0u);  // a directory: unreadable, zeros
}

// Many processes writing and reading the same keys into one empty store.
TEST(CacheDisk, ConcurrentProcessesSameKeys) {
  std::string root = test_dir() + "/store";
  constexpr int kProcs = 8, kKeys = 20;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      auto t = open_disk_tier({root});
      for (int round = 0; round < 15 && code == 0; ++round) {
        for (int k = 0; k < kKeys; ++k) {
          int key = (k + p * 3) % kKeys;
          Entry e = make_entry(key, 1000 + key * 997);
          GetResult r = t->get(Level::kernel, e.key);
          if (r.outcome == Outcome::error) code = 2;
          if (r.outcome == Outcome::hit && !same_entry(*r.entry, e)) code = 3;
          if (r.outcome == Outcome::miss && !t->put(e).ok) code = 4;
          if ((round + key) % 5 == 0 && !t->put(e).ok) code = 5;
        }
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status)) << "killed by a signal";
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto t = open_disk_tier({root});
  VerifyReport rep = t->verify();
  EXPECT_TRUE(rep.removed.empty());
  EXPECT_EQ(rep.ok, static_cast<uint64_t>(kKeys));
  EXPECT_TRUE(temp_files(root).empty());
}

TEST(CacheDisk, ManyThreadsOneTier) {
  std::string root = test_dir();
  auto t = open_disk_tier({root, 30 * (kEntryHeaderSize + 2000)});
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; i < 200; ++i) {
        int k = (i * 5 + th) % 40;
        Entry e = make_entry(k, 2000);
        GetResult r = t->get(Level::kernel, e.key);
        if (r.outcome == Outcome::error || (r.outcome == Outcome::hit && !same_entry(*r.entry, e)))
          ++bad;
        if (r.outcome != Outcome::hit && !t->put(e).ok) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(t->verify().removed.empty());
  EXPECT_LE(t->total_bytes(), 30 * (kEntryHeaderSize + 2000));
}

// A writer killed in the middle of a write leaves only a temp file: never an entry.
TEST(CacheDisk, KilledWriterLeavesNoEntry) {
  std::string root = test_dir();
  auto t = open_disk_tier({root});
  Entry big = make_entry(7, 1);
  big.payload.assign(256u << 20, 0x5a);
  const std::string path = t->entry_path(Level::kernel, big.key);
  bool caught = false;
  for (int attempt = 0; attempt < 3 && !caught; ++attempt) {
    pid_t pid = ::fork();
    if (pid == 0) {
      t->put(big);
      ::_exit(0);
    }
    bool seen = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!seen && !fs::exists(path) && std::chrono::steady_clock::now() < deadline) {
      for (const auto& tmp : temp_files(root)) {
        std::error_code ec;
        if (fs::file_size(tmp, ec) > 0 && !ec) seen = true;
      }
      if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // The writer may have finished between the look and the kill: then the entry is whole.
    caught = seen && !fs::exists(path);
    if (!caught) {
      GetResult r = t->get(Level::kernel, big.key);
      ASSERT_NE(r.outcome, Outcome::error) << r.reason;
      t->clear();
      for (const auto& tmp : temp_files(root)) fs::remove(tmp);
    }
  }
  ASSERT_TRUE(caught) << "the writer always finished before it could be killed";
  GetResult r = t->get(Level::kernel, big.key);
  EXPECT_EQ(r.outcome, Outcome::miss) << r.reason;
  EXPECT_TRUE(t->list().empty());
  EXPECT_TRUE(t->verify().removed.empty());
  auto temps = temp_files(root);
  ASSERT_EQ(temps.size(), 1u);
  EXPECT_EQ(t->gc().temp_files_removed, 0u) << "a fresh temp file may be a live writer's";
  set_mtime(temps[0], 3600);
  GcReport rep = t->gc();
  EXPECT_EQ(rep.temp_files_removed, 1u);
  EXPECT_TRUE(temp_files(root).empty());
}

}  // namespace
