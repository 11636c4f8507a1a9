// The remote (Redis) tier against a real redis-server started on a free loopback port: URL
// parsing, round trips, signing, a dead, killed or silent server, corrupt values, read-only
// mode, and two processes with separate local caches sharing one server.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "unit/run_model.h"
#include "unit/test_support.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cache/disk_tier.h"
#include "cache/redis_tier.h"
#include "support/local_redis.h"
#include "zc/error.h"

namespace zc::cache {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

using zc_support::can_connect;
using zc_support::find_program;
using zc_support::free_port;

// Output of a shell command, without its trailing newlines.
std::string shell(const std::string& cmd) {
  std::string out = test::run_shell(cmd).out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// redis-server on 127.0.0.1 only (tools/support/local_redis.h), with redis-cli against it.
class RedisServer : public zc_support::LocalRedis {
 public:
  using LocalRedis::LocalRedis;
  std::string cli(const std::string& args) const {
    return shell(find_program("redis-cli") + " -h 127.0.0.1 -p " + std::to_string(port()) +
                 (password().empty() ? "" : " --no-auth-warning -a " + password()) + " " + args);
  }
};

// A loopback TCP proxy in front of a server: every reply is held back `delay_ms` before it is
// passed on (a slow or distant Redis), and with `cut_after_replies` set, the proxy drops every
// connection and stops listening once that many replies went through (a server that dies in
// the middle of a run). Requests pass at once.
class DelayProxy {
 public:
  DelayProxy(int upstream_port, int delay_ms, int cut_after_replies = -1)
      : upstream_(upstream_port), delay_ms_(delay_ms), cut_after_(cut_after_replies) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listen_fd_, 64);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;
  ~DelayProxy() {
    cut();
    acceptor_.join();
    for (std::thread& t : relays_) t.join();
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int replies() const { return replies_; }
  // Drops every connection; new ones are refused from now on.
  void cut() {
    std::lock_guard lock(mu_);
    if (cut_) return;
    cut_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  }

 private:
  void accept_loop() {
    for (;;) {
      int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) break;
      int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(upstream_));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      std::lock_guard lock(mu_);
      if (cut_ || connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(client);
        close(server);
        if (cut_) break;
        continue;
      }
      open_fds_.insert(open_fds_.end(), {client, server});
      relays_.emplace_back([this, client, server] {
        std::thread up([this, client, server] { pump(client, server, false); });
        pump(server, client, true);
        up.join();
        close(client);
        close(server);
      });
    }
    close(listen_fd_);
  }
  // Copies `from` to `to` until either end closes; replies are delayed and counted.
  void pump(int from, int to, bool replies) {
    std::array<char, 1 << 16> buf{};
    for (;;) {
      ssize_t n = read(from, buf.data(), buf.size());
      if (n <= 0) break;
      if (replies) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      // Counted before the client can see it: a client that exits on this reply must not find
      // replies() short (a loaded machine may not run this thread again before it asks).
      const int count = replies ? ++replies_ : 0;
      if (send(to, buf.data(), static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      if (replies && count == cut_after_) cut();
    }
    shutdown(to, SHUT_RDWR);
    shutdown(from, SHUT_RDWR);
  }

  int upstream_, delay_ms_, cut_after_;
  int listen_fd_ = -1, port_ = 0;
  std::atomic<int> replies_{0};
  std::mutex mu_;
  bool cut_ = false;
  std::vector<int> open_fds_;
  std::thread acceptor_;
  std::vector<std::thread> relays_;
};

#define SKIP_WITHOUT_REDIS()                                                     \
  if (find_program("redis-server").empty() || find_program("redis-cli").empty()) \
  GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)"

Entry make_entry(Level level, const std::string& tag, size_t size = 1000) {
  Entry e;
  e.level = level;
  e.key = sha256(tag);
  e.compile_ms = 12.5;
  e.created_unix = 1700000000;
  e.payload.resize(size);
  for (size_t i = 0; i < size; ++i) e.payload[i] = static_cast<uint8_t>(i * 7 + tag.size());
  return e;
}

RedisOptions options_for(int port) {
  RedisOptions o;
  o.port = port;
  return o;
}

TEST(CacheRedisUrl, ParsesEveryForm) {
  RedisOptions a = parse_redis_url("redis://127.0.0.1:7000");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.db, 0);
  EXPECT_TRUE(a.password.empty());
  RedisOptions b = parse_redis_url("redis://alice:s%40cret:x@cache.example:6390/3");
  EXPECT_EQ(b.user, "alice");
  EXPECT_EQ(b.password, "s@cret:x");
  EXPECT_EQ(b.host, "cache.example");
  EXPECT_EQ(b.port, 6390);
  EXPECT_EQ(b.db, 3);
  RedisOptions c = parse_redis_url("redis://:pw@[::1]:6379/");
  EXPECT_EQ(c.user, "");
  EXPECT_EQ(c.password, "pw");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(parse_redis_url("redis://h").port, 6379);
  EXPECT_EQ(redis_display_url(b), "redis://alice:***@cache.example:6390/3");
}

TEST(CacheRedisUrl, MalformedUrlsNameTheVariableAndTheForm) {
  for (const char* bad :
       {"http://h:1", "redis://", "redis://h:", "redis://h:0", "redis://h:70000", "redis://h:x",
        "redis://h:1/db", "redis://user@h:1", "redis://u:@h:1", "redis://::1:6379", "redis://[::1",
        "redis://u:p%4@h:1", "127.0.0.1:6379"}) {
    try {
      parse_redis_url(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("ZC_REMOTE_CACHE"), std::string::npos) << m;
      EXPECT_NE(m.find("redis://[user:password@]host[:port][/db]"), std::string::npos) << m;
    }
  }
  // The password never appears in the message.
  try {
    parse_redis_url("redis://u:topsecret@h:99999");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
  }
}

TEST(CacheRedis, PutGetRoundTripWithTtl) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  RedisOptions o = options_for(server.port());
  o.ttl_seconds = 3600;
  auto tier = make_redis_tier(o);
  EXPECT_EQ(tier->name(), "redis");
  Entry e = make_entry(Level::kernel, "round trip", 200000);
  EXPECT_EQ(tier->get(e.level, e.key).outcome, Outcome::miss);
  PutResult p = tier->put(e);
  ASSERT_TRUE(p.ok) << p.reason;
  GetResult r = tier->get(e.level, e.key);
  ASSERT_EQ(r.outcome, Outcome::hit) << r.reason;
  EXPECT_EQ(r.entry->payload, e.payload);
  EXPECT_EQ(r.entry->compile_ms, e.compile_ms);
  // Another level under the same key is another entry.
  EXPECT_EQ(tier->get(Level::graph, e.key).outcome, Outcome::miss);
  std::string name = "zc:v1:kernel:" + hex(e.key);
  EXPECT_EQ(server.cli("EXISTS " + name), "1");
  int ttl = std::stoi(server.cli("TTL " + name));
  EXPECT_GT(ttl, 3500);
  EXPECT_LE(ttl, 3600);
  ASSERT_EQ(tier->list().size(), 1u);
  EXPECT_EQ(tier->list()[0].info.key, e.key);
  EXPECT_EQ(tier->clear(), 1u);
  EXPECT_EQ(server.cli("DBSIZE"), "0");
}

TEST(CacheRedis, PasswordAndDatabase) {
  SKIP_WITHOUT_REDIS();
  RedisServer server("hunter2");
  Entry e = make_entry(Level::graph, "auth");
  RedisOptions good =
      parse_redis_url("redis://:hunter2@127.0.0.1:" + std::to_string(server.port()) + "/2");
  auto tier = make_redis_tier(good);
  ASSERT_TRUE(tier->put(e).ok);
  EXPECT_EQ(tier->get(e.level, e.key).outcome, Outcome::hit);
  EXPECT_EQ(server.cli("-n 2 DBSIZE"), "1");
  EXPECT_EQ(server.cli("-n 0 DBSIZE"), "0");
  // No password: the server refuses, which is an error with a reason, not a miss.
  auto anonymous = make_redis_tier(options_for(server.port()));
  GetResult r = anonymous->get(e.level, e.key);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_NE(r.reason.find("NOAUTH"), std::string::npos) << r.reason;
  RedisOptions wrong = good;
  wrong.password = "wrong";
  r = make_redis_tier(wrong)->get(e.level, e.key);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_EQ(r.reason.find("hunter2"), std::string::npos) << r.reason;
}

TEST(CacheRedis, SignedValuesAndUnsignedRefusedWhenAKeyIsConfigured) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  RedisOptions plain = options_for(server.port());
  RedisOptions keyed = plain;
  keyed.hmac_key = {'k', 'e', 'y', '1'};
  RedisOptions other_key = plain;
  other_key.hmac_key = {'k', 'e', 'y', '2'};

  Entry unsigned_entry = make_entry(Level::graph, "unsigned");
  ASSERT_TRUE(make_redis_tier(plain)->put(unsigned_entry).ok);
  GetResult r = make_redis_tier(keyed)->get(Level::graph, unsigned_entry.key);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_NE(r.reason.find("unsigned"), std::string::npos) << r.reason;

  Entry signed_entry = make_entry(Level::graph, "signed");
  ASSERT_TRUE(make_redis_tier(keyed)->put(signed_entry).ok);
  r = make_redis_tier(keyed)->get(Level::graph, signed_entry.key);
  ASSERT_EQ(r.outcome, Outcome::hit) << r.reason;
  EXPECT_EQ(r.entry->payload, signed_entry.payload);
  r = make_redis_tier(other_key)->get(Level::graph, signed_entry.key);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_NE(r.reason.find("signature"), std::string::npos) << r.reason;
  // Without a key a signed value is accepted unverified (its checksums still hold).
  EXPECT_EQ(make_redis_tier(plain)->get(Level::graph, signed_entry.key).outcome, Outcome::hit);

  // A signed value copied under another key does not verify there.
  std::string from = "zc:v1:graph:" + hex(signed_entry.key);
  std::string to = "zc:v1:graph:" + hex(unsigned_entry.key);
  server.cli("COPY " + from + " " + to + " REPLACE");
  r = make_redis_tier(keyed)->get(Level::graph, unsigned_entry.key);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_NE(r.reason.find("signature"), std::string::npos) << r.reason;
}

TEST(CacheRedis, CorruptOrMisplacedValuesAreErrors) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  auto tier = make_redis_tier(options_for(server.port()));
  Entry e = make_entry(Level::lowering, "corrupt");
  std::string name = "zc:v1:lowering:" + hex(e.key);
  server.cli("SET " + name + " garbage");
  GetResult r = tier->get(e.level, e.key);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_FALSE(r.reason.empty());
  // A valid entry stored under another key name.
  Entry other = make_entry(Level::lowering, "other");
  ASSERT_TRUE(tier->put(other).ok);
  server.cli("COPY zc:v1:lowering:" + hex(other.key) + " " + name + " REPLACE");
  r = tier->get(e.level, e.key);
  EXPECT_EQ(r.outcome, Outcome::error);
  // A value of the wrong Redis type.
  server.cli("DEL " + name);
  server.cli("LPUSH " + name + " x");
  EXPECT_EQ(tier->get(e.level, e.key).outcome, Outcome::error);
  // The tier still works afterwards.
  EXPECT_EQ(tier->get(other.level, other.key).outcome, Outcome::hit);
}

TEST(CacheRedis, ReadOnlyNeverWrites) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  RedisOptions o = options_for(server.port());
  o.read_only = true;
  auto tier = make_redis_tier(o);
  Entry e = make_entry(Level::graph, "read only");
  EXPECT_FALSE(tier->put(e).ok);
  EXPECT_EQ(tier->clear(), 0u);
  EXPECT_EQ(tier->get(e.level, e.key).outcome, Outcome::miss);
  EXPECT_EQ(server.cli("DBSIZE"), "0");
}

TEST(CacheRedis, DeadServerIsQuickAndTheBreakerSkipsIt) {
  SKIP_WITHOUT_REDIS();
  RedisOptions o = options_for(free_port());  // nothing listens there
  o.breaker_open_ms = 300;
  auto tier = make_redis_tier(o);
  Entry e = make_entry(Level::graph, "dead");
  auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) {
    GetResult r = tier->get(e.level, e.key);
    EXPECT_EQ(r.outcome, Outcome::error);
    EXPECT_NE(r.reason.find("cannot connect"), std::string::npos) << r.reason;
  }
  GetResult skipped = tier->get(e.level, e.key);
  EXPECT_EQ(skipped.outcome, Outcome::error);
  EXPECT_NE(skipped.reason.find("skipped"), std::string::npos) << skipped.reason;
  EXPECT_FALSE(tier->put(e).ok);
  EXPECT_LT(ms_since(t0), 1000);
  // After the breaker's pause the server is tried again, and used once it is there.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  GetResult retried = tier->get(e.level, e.key);
  EXPECT_NE(retried.reason.find("cannot connect"), std::string::npos) << retried.reason;
  // One more failure right after a retry reopens the breaker at once.
  EXPECT_NE(tier->get(e.level, e.key).reason.find("skipped"), std::string::npos);
}

TEST(CacheRedis, SilentServerIsBoundedByTheCommandTimeout) {
  SKIP_WITHOUT_REDIS();
  // A listening socket that is never accepted from: connecting succeeds (the kernel's
  // backlog), but no reply ever comes, like a server stuck or far away.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  RedisOptions o = options_for(ntohs(a.sin_port));
  o.command_timeout_ms = 200;
  auto tier = make_redis_tier(o);
  Entry e = make_entry(Level::graph, "silent");
  auto t0 = Clock::now();
  GetResult r = tier->get(e.level, e.key);
  double first_ms = ms_since(t0);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_NE(r.reason.find("200 ms"), std::string::npos) << r.reason;
  EXPECT_GE(first_ms, 150);
  EXPECT_LT(first_ms, 1000);
  // Three timeouts open the breaker; everything after costs nothing.
  tier->get(e.level, e.key);
  tier->get(e.level, e.key);
  t0 = Clock::now();
  for (int i = 0; i < 100; ++i) tier->get(e.level, e.key);
  EXPECT_LT(ms_since(t0), 100);
  close(fd);
}

TEST(CacheRedis, ServerKilledMidRunGivesErrorsNotACrash) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  auto tier = make_redis_tier(options_for(server.port()));
  Entry e = make_entry(Level::kernel, "killed", 1 << 20);
  ASSERT_TRUE(tier->put(e).ok);
  ASSERT_EQ(tier->get(e.level, e.key).outcome, Outcome::hit);
  server.stop();
  // Large writes to the dead connection would raise SIGPIPE without the tier's guard.
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(tier->put(e).ok);
    EXPECT_EQ(tier->get(e.level, e.key).outcome, Outcome::error);
  }
}

TEST(CacheRedis, CompileLocks) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  auto tier = make_redis_tier(options_for(server.port()));
  Tier* locks = tier.get();
  Digest key = sha256(std::string("lock"));
  EXPECT_EQ(locks->try_lock(Level::graph, key, "a", 5000), LockState::acquired);
  EXPECT_EQ(locks->try_lock(Level::graph, key, "b", 5000), LockState::held);
  locks->unlock(Level::graph, key, "b");  // not b's lock: stays
  EXPECT_EQ(locks->try_lock(Level::graph, key, "b", 5000), LockState::held);
  locks->unlock(Level::graph, key, "a");
  EXPECT_EQ(locks->try_lock(Level::graph, key, "b", 100), LockState::acquired);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // expired by itself
  EXPECT_EQ(locks->try_lock(Level::graph, key, "c", 5000), LockState::acquired);
  // Locks are not entries.
  EXPECT_TRUE(tier->list().empty());
  RedisOptions ro = options_for(server.port());
  ro.read_only = true;
  auto reader = make_redis_tier(ro);
  EXPECT_EQ(reader->try_lock(Level::graph, sha256("x"), "r", 100), LockState::unavailable);
  server.stop();
  EXPECT_EQ(locks->try_lock(Level::graph, sha256("y"), "d", 100), LockState::unavailable);
}

using test::ProcessRun;
using test::run_model;
using test::zc_cli;

std::string fresh_dir(const std::string& name) {
  return zc::test::fresh_dir("cache_redis", name);
}

double all_levels(const ProcessRun& r, const std::string& tier, const std::string& what) {
  double sum = 0;
  for (const char* level : {"graph", "lowering", "kernel", "autotune"})
    sum += std::max(0.0, r.cache_count(level, tier, what));
  return sum;
}

// The process cache's read path, in process: a remote hit is returned, copied into memory at
// once and onto the disk behind the caller's back; contains() and the export wait for that write.
TEST(CacheRedisTiers, RemoteHitIsWrittenBehindToDisk) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  CacheConfig writer_config;
  writer_config.dir = fresh_dir("behind_writer");
  writer_config.remote_url = server.url();
  Key key(Level::graph);
  key.add("graph", "write-behind test");
  std::vector<uint8_t> payload(300000, 7);
  {
    Cache writer(writer_config);
    writer.put(key, payload, 12.5);
  }
  CacheConfig reader_config = writer_config;
  reader_config.dir = fresh_dir("behind_reader");
  Cache reader(reader_config);
  std::optional<Entry> hit = reader.get(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->payload, payload);
  EXPECT_EQ(reader.counters({Level::graph, TierKind::remote}).hits, 1);
  EXPECT_TRUE(reader.contains(Level::graph, key.digest()));  // memory, at once
  reader.drain_disk_writes();
  EXPECT_EQ(reader.disk()->get(Level::graph, key.digest()).outcome, Outcome::hit);
  std::vector<BundleItem> items = store_items(reader);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].entry.key, key.digest());
  // Stopped (as at exit), later hits are written at once.
  Key other(Level::kernel);
  other.add("source", "write-behind test 2");
  {
    Cache writer(writer_config);
    writer.put(other, payload, 1);
  }
  reader.stop_writer();
  ASSERT_TRUE(reader.get(other));
  EXPECT_EQ(reader.disk()->get(Level::kernel, other.digest()).outcome, Outcome::hit);
}

// prefetch(): one MGET for what is not local, then each get() takes its answer without asking
// the server again; the counters are those of plain lookups.
TEST(CacheRedisTiers, PrefetchAsksOnceForManyKeys) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  CacheConfig config;
  config.dir = fresh_dir("prefetch_writer");
  config.remote_url = server.url();
  std::vector<Key> keys;
  for (int i = 0; i < 4; ++i) {
    keys.emplace_back(Level::graph);
    keys.back().add("graph", "prefetch test " + std::to_string(i));
  }
  {
    Cache writer(config);
    for (int i = 0; i < 3; ++i) writer.put(keys[i], std::vector<uint8_t>(5000, i), 1);
  }
  config.dir = fresh_dir("prefetch_reader");
  Cache reader(config);
  ASSERT_TRUE(reader.get(keys[0]));  // now local: not asked for again
  server.cli("CONFIG RESETSTAT");
  reader.prefetch(keys);
  for (int i = 0; i < 3; ++i) {
    std::optional<Entry> e = reader.get(keys[i]);
    ASSERT_TRUE(e) << i;
    EXPECT_EQ(e->payload, std::vector<uint8_t>(5000, i));
  }
  EXPECT_FALSE(reader.get(keys[3]));  // the staged miss
  std::string stats = server.cli("INFO commandstats");
  EXPECT_NE(stats.find("cmdstat_mget:calls=1,"), std::string::npos) << stats;
  EXPECT_EQ(stats.find("cmdstat_get:"), std::string::npos) << stats;
  EXPECT_EQ(reader.counters({Level::graph, TierKind::remote}).hits, 3);
  EXPECT_EQ(reader.counters({Level::graph, TierKind::remote}).misses, 1);
  // A staged answer is used once: the next lookup asks the server.
  EXPECT_FALSE(reader.get(keys[3]));
  EXPECT_NE(server.cli("INFO commandstats").find("cmdstat_get:calls=1,"), std::string::npos);
}

// A process that forks after its writer thread started (worker processes, say): the child
// has the queue but not the thread, and must neither hang nor lose its writes.
TEST(CacheRedisTiers, ForkedChildWritesBehindWithoutItsParentsThread) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  CacheConfig config;
  config.dir = fresh_dir("fork_writer");
  config.remote_url = server.url();
  std::vector<Key> keys;
  for (int i = 0; i < 3; ++i) {
    keys.emplace_back(Level::graph);
    keys.back().add("graph", "fork test " + std::to_string(i));
  }
  {
    Cache writer(config);
    for (const Key& k : keys) writer.put(k, std::vector<uint8_t>(1000, 1), 1);
  }
  config.dir = fresh_dir("fork_reader");
  Cache reader(config);
  ASSERT_TRUE(reader.get(keys[0]));  // starts the writer thread
  pid_t child = fork();
  if (child == 0) {
    // In the child: a hit queues a write (a new writer), then one while stopped is at once.
    bool ok = reader.get(keys[1]).has_value();
    reader.drain_disk_writes();
    ok = ok && reader.disk()->get(Level::graph, keys[1].digest()).outcome == Outcome::hit;
    reader.stop_writer();
    ok = ok && reader.get(keys[2]).has_value() &&
         reader.disk()->get(Level::graph, keys[2].digest()).outcome == Outcome::hit;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  reader.drain_disk_writes();
  EXPECT_EQ(reader.disk()->get(Level::graph, keys[0].digest()).outcome, Outcome::hit);
}

TEST(CacheRedisProcess, SecondMachineCompilesNothing) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  std::string env = " ZC_REMOTE_CACHE=" + server.url();
  ProcessRun first = run_model("ZC_CACHE_DIR=" + fresh_dir("first") + env);
  ASSERT_EQ(first.rc, 0) << first.out;
  EXPECT_GE(first.num("compiler", "compiler_invocations"), 1) << first.out;
  EXPECT_GE(all_levels(first, "redis", "puts"), 1) << first.out;
  EXPECT_NE(server.cli("DBSIZE"), "0");
  std::string second_dir = fresh_dir("second");
  ProcessRun second = run_model("ZC_CACHE_DIR=" + second_dir + env);
  ASSERT_EQ(second.rc, 0) << second.out;
  EXPECT_EQ(second.num("compiler", "compiler_invocations"), 0) << second.out;
  EXPECT_GE(second.cache_count("graph", "redis", "hits"), 1) << second.out;
  EXPECT_EQ(all_levels(second, "redis", "errors"), 0) << second.out;
  EXPECT_EQ(second.lines["output"], first.lines["output"]);
  // The remote hit was copied to the local disk: a third run needs no server at all.
  ProcessRun third = run_model("ZC_CACHE_DIR=" + second_dir);
  EXPECT_EQ(third.num("compiler", "compiler_invocations"), 0) << third.out;
  EXPECT_GE(third.cache_count("graph", "disk", "hits"), 1) << third.out;
}

TEST(CacheRedisProcess, NoServerStillCompilesQuicklyAndCountsErrors) {
  SKIP_WITHOUT_REDIS();
  ProcessRun local = run_model("ZC_CACHE_DIR=" + fresh_dir("local"));
  ASSERT_EQ(local.rc, 0) << local.out;
  ProcessRun r = run_model("ZC_CACHE_DIR=" + fresh_dir("no_server") +
                           " ZC_REMOTE_CACHE=redis://127.0.0.1:" + std::to_string(free_port()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GE(r.num("compiler", "compiler_invocations"), 1) << r.out;
  EXPECT_GE(all_levels(r, "redis", "errors"), 1) << r.out;
  EXPECT_EQ(all_levels(r, "redis", "hits"), 0) << r.out;
  EXPECT_EQ(r.lines["output"], local.lines["output"]);
  // Refused connections cost microseconds; allow for a loaded machine, not for a stall.
  EXPECT_LT(r.ms, local.ms + 3 * 200 + 2000) << "local " << local.ms << " ms";
}

TEST(CacheRedisProcess, SlowServerWithinTheTimeoutIsStillUsed) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  ProcessRun first =
      run_model("ZC_CACHE_DIR=" + fresh_dir("slow_fill") + " ZC_REMOTE_CACHE=" + server.url());
  ASSERT_EQ(first.rc, 0) << first.out;
  // 40 ms per reply: slow, but inside the default 500 ms command timeout.
  DelayProxy slow(server.port(), 40);
  ProcessRun r =
      run_model("ZC_CACHE_DIR=" + fresh_dir("slow_use") + " ZC_REMOTE_CACHE=" + slow.url());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.num("compiler", "compiler_invocations"), 0) << r.out;
  EXPECT_GE(r.cache_count("graph", "redis", "hits"), 1) << r.out;
  EXPECT_EQ(all_levels(r, "redis", "errors"), 0) << r.out;
  EXPECT_EQ(r.lines["output"], first.lines["output"]);
  EXPECT_GT(slow.replies(), 0);
}

TEST(CacheRedisProcess, SlowServerPastTheTimeoutCostsAtMostTheTimeouts) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  ProcessRun local = run_model("ZC_CACHE_DIR=" + fresh_dir("slow_local"));
  ASSERT_EQ(local.rc, 0) << local.out;
  // Every reply arrives after 400 ms; the command timeout is 100 ms.
  DelayProxy slow(server.port(), 400);
  ProcessRun r = run_model("ZC_LOGS=cache ZC_CACHE_DIR=" + fresh_dir("slow_cut") +
                           " ZC_REMOTE_CACHE_TIMEOUT_MS=100 ZC_REMOTE_CACHE=" + slow.url());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GE(r.num("compiler", "compiler_invocations"), 1) << r.out;
  EXPECT_GE(all_levels(r, "redis", "errors"), 1) << r.out;
  EXPECT_EQ(all_levels(r, "redis", "hits"), 0) << r.out;
  EXPECT_NE(r.out.find("no reply within 100 ms"), std::string::npos) << r.out;
  EXPECT_EQ(r.lines["output"], local.lines["output"]);
  // Three timed-out commands open the breaker; everything after skips the server. The bound
  // allows for a loaded machine, not for a stall per lookup.
  EXPECT_LT(r.ms, local.ms + 3 * 100 + 2000) << "local " << local.ms << " ms";
}

TEST(CacheRedisProcess, ServerDyingMidRunStillGivesTheRightOutput) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  ProcessRun local = run_model("ZC_CACHE_DIR=" + fresh_dir("dying_local"));
  ASSERT_EQ(local.rc, 0) << local.out;
  // The server goes away after answering its second command (a lookup or a lock).
  DelayProxy dying(server.port(), 0, 2);
  ProcessRun r = run_model("ZC_LOGS=cache ZC_CACHE_DIR=" + fresh_dir("dying") +
                           " ZC_REMOTE_CACHE=" + dying.url());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GE(all_levels(r, "redis", "errors") + all_levels(r, "redis", "put_failures"), 1) << r.out;
  // Logged with the reason, as a failed lookup or a failed store.
  EXPECT_TRUE(r.out.find(" redis error (") != std::string::npos ||
              r.out.find(" redis failed (") != std::string::npos)
      << r.out;
  EXPECT_EQ(r.lines["output"], local.lines["output"]);
  EXPECT_LT(r.ms, local.ms + 3 * 500 + 2000) << "local " << local.ms << " ms";
}

TEST(CacheRedisProcess, CorruptValuesAreRefusedAndTheOutputIsRight) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  std::string env = " ZC_REMOTE_CACHE=" + server.url();
  ProcessRun first = run_model("ZC_CACHE_DIR=" + fresh_dir("corrupt_a") + env);
  ASSERT_EQ(first.rc, 0) << first.out;
  std::string keys = server.cli("--scan --pattern 'zc:v1:*'");
  ASSERT_FALSE(keys.empty());
  size_t start = 0;
  while (start < keys.size()) {
    size_t end = keys.find('\n', start);
    if (end == std::string::npos) end = keys.size();
    server.cli("SET " + keys.substr(start, end - start) + " garbage");
    start = end + 1;
  }
  ProcessRun second = run_model("ZC_CACHE_DIR=" + fresh_dir("corrupt_b") + env);
  ASSERT_EQ(second.rc, 0) << second.out;
  EXPECT_GE(second.cache_count("graph", "redis", "errors"), 1) << second.out;
  EXPECT_EQ(all_levels(second, "redis", "hits"), 0) << second.out;
  EXPECT_GE(second.num("compiler", "compiler_invocations"), 1) << second.out;
  EXPECT_EQ(second.lines["output"], first.lines["output"]);
  // The recompile wrote good values over the garbage.
  ProcessRun third = run_model("ZC_CACHE_DIR=" + fresh_dir("corrupt_c") + env);
  EXPECT_EQ(third.num("compiler", "compiler_invocations"), 0) << third.out;
}

TEST(CacheRedisProcess, ReadOnlyAndSignedModes) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  std::string env = " ZC_REMOTE_CACHE=" + server.url();
  ProcessRun ro =
      run_model("ZC_CACHE_DIR=" + fresh_dir("ro") + env + " ZC_REMOTE_CACHE_READONLY=1");
  ASSERT_EQ(ro.rc, 0) << ro.out;
  EXPECT_EQ(server.cli("DBSIZE"), "0");
  EXPECT_EQ(all_levels(ro, "redis", "put_failures"), 0) << ro.out;
  // An unsigned writer, then a reader that requires signatures: nothing is used.
  ASSERT_EQ(run_model("ZC_CACHE_DIR=" + fresh_dir("unsigned") + env).rc, 0);
  std::string key_file = fresh_dir("key") + "/hmac.key";
  std::ofstream(key_file) << "team secret\n";
  ProcessRun keyed =
      run_model("ZC_CACHE_DIR=" + fresh_dir("keyed") + env + " ZC_CACHE_HMAC_KEY_FILE=" + key_file);
  ASSERT_EQ(keyed.rc, 0) << keyed.out;
  EXPECT_EQ(all_levels(keyed, "redis", "hits"), 0) << keyed.out;
  EXPECT_GE(keyed.cache_count("graph", "redis", "errors"), 1) << keyed.out;
  EXPECT_GE(keyed.num("compiler", "compiler_invocations"), 1) << keyed.out;
  EXPECT_NE(keyed.out.find("unsigned value refused"), std::string::npos) << keyed.out;
  // Its signed entries serve the next keyed reader.
  ProcessRun keyed2 = run_model("ZC_CACHE_DIR=" + fresh_dir("keyed2") + env +
                                " ZC_CACHE_HMAC_KEY_FILE=" + key_file);
  EXPECT_EQ(keyed2.num("compiler", "compiler_invocations"), 0) << keyed2.out;
  EXPECT_EQ(all_levels(keyed2, "redis", "errors"), 0) << keyed2.out;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

TEST(CacheRedisProcess, WaitsForTheProcessHoldingTheCompileLock) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  std::string env = " ZC_REMOTE_CACHE=" + server.url();
  ProcessRun first = run_model("ZC_CACHE_DIR=" + fresh_dir("flight_a") + env);
  ASSERT_EQ(first.rc, 0) << first.out;
  EXPECT_TRUE(server.cli("--scan --pattern 'zc:v1:lock:*'").empty()) << "locks left behind";
  // Pretend another process is compiling every graph: its locks are held and the graph
  // entries appear only 800 ms later.
  std::vector<std::string> graphs = lines_of(server.cli("--scan --pattern 'zc:v1:graph:*'"));
  ASSERT_FALSE(graphs.empty());
  for (const std::string& g : graphs) {
    server.cli("RENAME " + g + " hidden:" + g);
    server.cli("SET zc:v1:lock:graph:" + g.substr(std::string("zc:v1:graph:").size()) +
               " other PX 10000");
  }
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    for (const std::string& g : graphs) server.cli("RENAME hidden:" + g + " " + g);
  });
  ProcessRun waiter = run_model("ZC_CACHE_DIR=" + fresh_dir("flight_b") + env);
  publisher.join();
  ASSERT_EQ(waiter.rc, 0) << waiter.out;
  EXPECT_GE(waiter.ms, 700);
  EXPECT_LT(waiter.ms, 8000);  // it did not wait out the 10 s lock
  EXPECT_GE(waiter.cache_count("graph", "redis", "hits"), 1) << waiter.out;
  EXPECT_EQ(waiter.cache_count("graph", "redis", "puts"), 0) << waiter.out;
  EXPECT_EQ(waiter.lines["output"], first.lines["output"]);

  // A holder that died: its lock expires and the waiter compiles itself.
  server.cli("FLUSHALL");
  ProcessRun probe = run_model("ZC_CACHE_DIR=" + fresh_dir("flight_c") + env);
  graphs = lines_of(server.cli("--scan --pattern 'zc:v1:graph:*'"));
  ASSERT_FALSE(graphs.empty());
  server.cli("FLUSHALL");
  for (const std::string& g : graphs)
    server.cli("SET zc:v1:lock:graph:" + g.substr(std::string("zc:v1:graph:").size()) +
               " dead PX 600");
  ProcessRun orphan = run_model("ZC_CACHE_DIR=" + fresh_dir("flight_d") + env);
  ASSERT_EQ(orphan.rc, 0) << orphan.out;
  EXPECT_GE(orphan.ms, 500);
  EXPECT_GE(orphan.num("compiler", "compiler_invocations"), 1) << orphan.out;
  EXPECT_GE(orphan.cache_count("graph", "redis", "puts"), 1) << orphan.out;
  EXPECT_EQ(orphan.lines["output"], first.lines["output"]);
  EXPECT_TRUE(server.cli("--scan --pattern 'zc:v1:lock:*'").empty());
}

TEST(CacheRedisProcess, ConcurrentProcessesCompileEachGraphOnce) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  std::string env = " ZC_REMOTE_CACHE=" + server.url();
  ProcessRun alone = run_model("ZC_CACHE_DIR=" + fresh_dir("alone"));
  ASSERT_EQ(alone.rc, 0) << alone.out;
  ProcessRun a, b;
  std::thread ta([&] { a = run_model("ZC_CACHE_DIR=" + fresh_dir("together_a") + env); });
  std::thread tb([&] { b = run_model("ZC_CACHE_DIR=" + fresh_dir("together_b") + env); });
  ta.join();
  tb.join();
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(a.num("compiler", "compiler_invocations") + b.num("compiler", "compiler_invocations"),
            alone.num("compiler", "compiler_invocations"))
      << a.out << b.out;
  EXPECT_EQ(a.lines["output"], alone.lines["output"]);
  EXPECT_EQ(b.lines["output"], alone.lines["output"]);
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(CacheRedisCli, LsAndClearRemote) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  const std::string local = fresh_dir("cli_local");
  const std::string env = "ZC_CACHE_DIR=" + local + " ZC_REMOTE_CACHE=" + server.url();
  ASSERT_EQ(run_model(env).rc, 0);
  const size_t stored = lines_of(server.cli("--scan --pattern 'zc:v1:*'")).size();
  ASSERT_GE(stored, 2u);

  ProcessRun json = zc_cli(env, "cache ls --remote --json");
  ASSERT_EQ(json.rc, 0) << json.out;
  EXPECT_EQ(count_of(json.out, "\"key\":"), stored) << json.out;
  EXPECT_EQ(count_of(json.out, "\"level\":\"graph\""), 2u) << json.out;
  ProcessRun text = zc_cli(env, "cache ls --remote");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_EQ(lines_of(text.out).size(), stored) << text.out;

  // Clearing a cache the whole fleet shares needs --yes; without it nothing is touched.
  ProcessRun refused = zc_cli(env, "cache clear --remote");
  EXPECT_EQ(refused.rc, 2) << refused.out;
  EXPECT_NE(refused.out.find("--yes"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("shared by every machine"), std::string::npos) << refused.out;
  EXPECT_EQ(server.cli("DBSIZE"), std::to_string(stored));
  ProcessRun ro = zc_cli(env + " ZC_REMOTE_CACHE_READONLY=1", "cache clear --remote --yes");
  EXPECT_EQ(ro.rc, 1) << ro.out;
  EXPECT_NE(ro.out.find("read-only"), std::string::npos) << ro.out;
  EXPECT_EQ(server.cli("DBSIZE"), std::to_string(stored));

  ProcessRun cleared = zc_cli(env, "cache clear --remote --yes --json");
  ASSERT_EQ(cleared.rc, 0) << cleared.out;
  EXPECT_NE(cleared.out.find("\"removed\":" + std::to_string(stored)), std::string::npos)
      << cleared.out;
  EXPECT_EQ(server.cli("DBSIZE"), "0");
  EXPECT_EQ(zc_cli(env, "cache ls --remote --json").out, "[]\n");
  // The local store is another cache: untouched.
  EXPECT_GE(lines_of(zc_cli("ZC_CACHE_DIR=" + local, "cache ls").out).size(), 2u);
}

TEST(CacheRedisCli, RemoteCommandsNeedAReachableServer) {
  SKIP_WITHOUT_REDIS();
  const std::string local = "ZC_CACHE_DIR=" + fresh_dir("cli_none");
  ProcessRun none = zc_cli(local, "cache ls --remote");
  EXPECT_EQ(none.rc, 1) << none.out;
  EXPECT_NE(none.out.find("ZC_REMOTE_CACHE"), std::string::npos) << none.out;
  // A dead server must not list as an empty cache, nor clear as a success.
  const std::string dead =
      local + " ZC_REMOTE_CACHE=redis://127.0.0.1:" + std::to_string(free_port());
  for (const char* args : {"cache ls --remote", "cache clear --remote --yes"}) {
    ProcessRun r = zc_cli(dead, args);
    EXPECT_EQ(r.rc, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find("cannot use the remote cache"), std::string::npos) << r.out;
  }
  EXPECT_EQ(zc_cli(local, "cache gc --remote").rc, 2);
}

TEST(CacheRedisProcess, EightConcurrentProcessesCompileEachGraphOnce) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  ProcessRun alone = run_model("ZC_CACHE_DIR=" + fresh_dir("eight_alone"));
  ASSERT_EQ(alone.rc, 0) << alone.out;
  ASSERT_GE(alone.num("compiler", "compiler_invocations"), 1) << alone.out;
  constexpr int kProcesses = 8;
  std::vector<ProcessRun> runs(kProcesses);
  std::vector<std::string> dirs;
  for (int i = 0; i < kProcesses; ++i) dirs.push_back(fresh_dir("eight_" + std::to_string(i)));
  std::vector<std::thread> threads;
  for (int i = 0; i < kProcesses; ++i) {
    threads.emplace_back([&, i] {
      runs[i] = run_model("ZC_CACHE_DIR=" + dirs[i] + " ZC_REMOTE_CACHE=" + server.url());
    });
  }
  for (auto& t : threads) t.join();
  double sum = 0;
  std::string all;
  for (const ProcessRun& r : runs) {
    ASSERT_EQ(r.rc, 0) << r.out;
    sum += r.num("compiler", "compiler_invocations");
    all += r.out;
    EXPECT_EQ(r.lines.at("output"), alone.lines.at("output"));
  }
  EXPECT_EQ(sum, alone.num("compiler", "compiler_invocations")) << all;
  EXPECT_TRUE(server.cli("--scan --pattern 'zc:v1:lock:*'").empty()) << "locks left behind";
}

// The key covers the zc build, so this build never even looks up another build's entry. That
// leaves one way for another build's code to reach it: an entry under this build's key whose
// payload says it was made elsewhere (a key that missed a component, or a hand-edited
// server). Such entries are refused by their provenance, a check independent of the key.
// Kernel entries name no build (a binary depends on its source, compiler and target only),
// so they are rightly reused.
TEST(CacheRedisProcess, AnotherBuildsEntryIsNeverUsed) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  const std::string env = " ZC_REMOTE_CACHE=" + server.url();
  ProcessRun first = run_model("ZC_CACHE_DIR=" + fresh_dir("build_a") + env);
  ASSERT_EQ(first.rc, 0) << first.out;
  auto tier = make_redis_tier(options_for(server.port()));
  int rewritten = 0;
  for (const TierListing& l : tier->list()) {
    GetResult r = tier->get(l.info.level, l.info.key);
    ASSERT_EQ(r.outcome, Outcome::hit) << r.reason;
    auto unwrapped = unwrap_payload(r.entry->payload);
    ASSERT_TRUE(unwrapped);
    if (unwrapped->first.build_id.empty()) continue;
    unwrapped->first.build_id = "another build";
    r.entry->payload = wrap_payload(unwrapped->first, unwrapped->second);
    ASSERT_TRUE(tier->put(*r.entry).ok);
    ++rewritten;
  }
  ASSERT_GE(rewritten, 2);
  ProcessRun second = run_model("ZC_CACHE_DIR=" + fresh_dir("build_b") + env);
  ASSERT_EQ(second.rc, 0) << second.out;
  EXPECT_EQ(second.cache_count("graph", "redis", "hits"), 0) << second.out;
  EXPECT_GE(second.cache_count("graph", "redis", "errors"), 1) << second.out;
  EXPECT_EQ(second.cache_count("lowering", "redis", "hits"), 0) << second.out;
  EXPECT_GE(second.cache_count("kernel", "redis", "hits"), 1) << second.out;
  EXPECT_EQ(second.lines["output"], first.lines["output"]);
}

TEST(CacheLocalFlight, ProcessesSharingADirectoryCompileEachGraphOnce) {
  ProcessRun alone = run_model("ZC_CACHE_DIR=" + fresh_dir("local_alone"));
  ASSERT_EQ(alone.rc, 0) << alone.out;
  const std::string shared = fresh_dir("local_shared");
  constexpr int kProcesses = 4;
  std::vector<ProcessRun> runs(kProcesses);
  std::vector<std::thread> threads;
  for (int i = 0; i < kProcesses; ++i)
    threads.emplace_back([&, i] { runs[i] = run_model("ZC_CACHE_DIR=" + shared); });
  for (auto& t : threads) t.join();
  double sum = 0;
  std::string all;
  for (const ProcessRun& r : runs) {
    ASSERT_EQ(r.rc, 0) << r.out;
    sum += r.num("compiler", "compiler_invocations");
    all += r.out;
    EXPECT_EQ(r.lines.at("output"), alone.lines.at("output"));
  }
  EXPECT_EQ(sum, alone.num("compiler", "compiler_invocations")) << all;
  EXPECT_FALSE(fs::is_empty(shared + "/locks"));
}

TEST(CacheLocalFlight, AHeldLockIsWaitedForUntilItsDeadline) {
  const std::string dir = fresh_dir("local_held");
  ProcessRun first = run_model("ZC_CACHE_DIR=" + dir);
  ASSERT_EQ(first.rc, 0) << first.out;
  // Another process compiling every graph: its locks are held and nothing is stored.
  fs::remove_all(dir + "/v1");
  std::vector<int> fds;
  for (const auto& f : fs::directory_iterator(dir + "/locks")) {
    int fd = open(f.path().c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(flock(fd, LOCK_EX), 0);
    fds.push_back(fd);
  }
  ASSERT_FALSE(fds.empty());
  ProcessRun waiter = run_model("ZC_CACHE_DIR=" + dir + " ZC_CACHE_LOCK_MS=300");
  for (int fd : fds) close(fd);
  ASSERT_EQ(waiter.rc, 0) << waiter.out;
  EXPECT_GE(waiter.ms, 300);
  EXPECT_EQ(waiter.num("compiler", "compiler_invocations"),
            first.num("compiler", "compiler_invocations"))
      << waiter.out;
  EXPECT_EQ(waiter.lines["output"], first.lines["output"]);
}

}  // namespace
}  // namespace zc::cache
