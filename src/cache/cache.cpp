#include "cache/cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "cache/disk_tier.h"
#include "cache/fingerprint.h"
#include "cache/lifetime_stats.h"
#include "cache/redis_tier.h"
#include "util/bytes.h"
#include "util/log.h"

namespace zc::cache {

namespace {

constexpr uint32_t kProvenanceMagic = 0x31766f70;  // "pov1"

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string default_dir() {
  std::string xdg = env_or("XDG_CACHE_HOME", "");
  if (!xdg.empty()) return xdg + "/zerocompile";
  std::string home = env_or("HOME", "");
  return home.empty() ? "" : home + "/.cache/zerocompile";
}

// An unsigned number from the environment, or `fallback` when unset.
uint64_t env_uint(const char* name, uint64_t fallback, const char* example) {
  std::string v = env_or(name, "");
  if (v.empty()) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || v[0] == '-') {
    throw Error(std::string(name) + "=\"" + v + "\" is not a number; expected digits, e.g. " +
                example);
  }
  return n;
}

}  // namespace

CacheConfig CacheConfig::from_env() {
  CacheConfig c;
  std::string off = env_or("ZC_FORCE_DISABLE_CACHES", "");
  c.persistent = off.empty() || off == "0";
  c.dir = env_or("ZC_CACHE_DIR", default_dir());
  if (c.dir.empty()) {
    std::fprintf(stderr,
                 "[zc] warning: no HOME and no ZC_CACHE_DIR: compiled graphs are not "
                 "persisted; set ZC_CACHE_DIR to a directory\n");
    c.persistent = false;
  }
  c.max_bytes = env_uint("ZC_CACHE_MAX_BYTES", 0, "ZC_CACHE_MAX_BYTES=1073741824");
  c.hmac_key_file = env_or("ZC_CACHE_HMAC_KEY_FILE", "");
  c.remote_url = env_or("ZC_REMOTE_CACHE", "");
  if (!c.remote_url.empty()) parse_redis_url(c.remote_url);  // a malformed URL fails here
  c.remote_ttl_seconds = env_uint("ZC_REMOTE_CACHE_TTL", 0, "ZC_REMOTE_CACHE_TTL=604800");
  std::string ro = env_or("ZC_REMOTE_CACHE_READONLY", "");
  c.remote_read_only = !ro.empty() && ro != "0";
  // Capped so a typo cannot turn the bound on a dead server's cost into minutes.
  c.remote_connect_timeout_ms = static_cast<int>(std::min<uint64_t>(
      env_uint("ZC_REMOTE_CACHE_CONNECT_TIMEOUT_MS", 200, "ZC_REMOTE_CACHE_CONNECT_TIMEOUT_MS=200"),
      60000));
  c.remote_timeout_ms = static_cast<int>(std::min<uint64_t>(
      env_uint("ZC_REMOTE_CACHE_TIMEOUT_MS", 500, "ZC_REMOTE_CACHE_TIMEOUT_MS=500"), 60000));
  c.remote_lock_ms = static_cast<int>(std::min<uint64_t>(
      env_uint("ZC_REMOTE_CACHE_LOCK_MS", 60000, "ZC_REMOTE_CACHE_LOCK_MS=60000"), 3600000));
  return c;
}

// Counters already written into the lifetime statistics, so each flush adds only the rest.
struct Cache::Flushed {
  std::vector<std::pair<std::string, TierCounters>> counters;
};

Cache::Cache(CacheConfig config)
    : config_(std::move(config)), flushed_(std::make_unique<Flushed>()) {
  memory_ = make_memory_tier(config_.memory_max_bytes);
  if (config_.persistent) disk_ = open_disk_tier(DiskTierOptions{config_.dir, config_.max_bytes});
  if (config_.persistent && !config_.remote_url.empty()) {
    RedisOptions o = parse_redis_url(config_.remote_url);
    o.ttl_seconds = config_.remote_ttl_seconds;
    o.read_only = config_.remote_read_only;
    o.connect_timeout_ms = config_.remote_connect_timeout_ms;
    o.command_timeout_ms = config_.remote_timeout_ms;
    // A configured key that cannot be read raises: it must not silently turn verification off.
    if (!config_.hmac_key_file.empty()) o.hmac_key = read_hmac_key_file(config_.hmac_key_file);
    remote_ = make_redis_tier(o);
  }
}

Cache::~Cache() = default;

void Cache::count(Level level, const std::string& tier, Outcome outcome, double saved_ms) {
  std::string name = std::string(level_name(level)) + "/" + tier;
  std::lock_guard lock(mu_);
  TierCounters* c = nullptr;
  for (auto& [n, v] : counters_) {
    if (n == name) c = &v;
  }
  if (!c) c = &counters_.emplace_back(name, TierCounters{}).second;
  if (outcome == Outcome::hit) {
    ++c->hits;
    c->saved_ms += saved_ms;
  } else if (outcome == Outcome::miss) {
    ++c->misses;
  } else {
    ++c->errors;
  }
}

TierCounters Cache::counters(Level level, const std::string& tier) const {
  std::string name = std::string(level_name(level)) + "/" + tier;
  std::lock_guard lock(mu_);
  for (const auto& [n, v] : counters_) {
    if (n == name) return v;
  }
  return {};
}

void Cache::note_touched(Level level, const Digest& key) {
  std::lock_guard lock(mu_);
  for (const auto& [l, k] : touched_) {
    if (l == level && k == key) return;
  }
  touched_.emplace_back(level, key);
}

std::vector<uint8_t> wrap_payload(const Provenance& p, std::span<const uint8_t> payload) {
  ByteWriter w;
  w.u32(kProvenanceMagic);
  w.str(p.build_id);
  w.str(p.target);
  w.str(p.toolchain);
  w.raw(payload.data(), payload.size());
  return w.take();
}

std::optional<std::pair<Provenance, std::vector<uint8_t>>> unwrap_payload(
    std::span<const uint8_t> stored) {
  try {
    ByteReader r(stored, "cache payload");
    if (r.u32() != kProvenanceMagic) return std::nullopt;
    Provenance p;
    p.build_id = r.str();
    p.target = r.str();
    p.toolchain = r.str();
    auto rest = r.raw(r.remaining());
    return std::make_pair(std::move(p), std::vector<uint8_t>(rest.begin(), rest.end()));
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<Entry> Cache::get(const Key& key) {
  Digest d = key.digest();
  Level level = key.level();
  std::vector<Tier*> tiers{memory_.get()};
  if (disk_) tiers.push_back(disk_.get());
  if (remote_) tiers.push_back(remote_.get());
  for (size_t i = 0; i < tiers.size(); ++i) {
    GetResult r = tiers[i]->get(level, d);
    count(level, tiers[i]->name(), r.outcome, r.entry ? r.entry->compile_ms : 0);
    ZC_LOG(cache) << "lookup " << level_name(level) << " " << tiers[i]->name() << " "
                  << (r.outcome == Outcome::hit    ? "hit"
                      : r.outcome == Outcome::miss ? "miss"
                                                   : "error (" + r.reason + ")")
                  << " key=" << zc::hex(d).substr(0, 16) << " " << key.describe();
    if (r.outcome != Outcome::hit) continue;
    // A hit in a slower tier is copied into the faster ones.
    for (size_t j = 0; j < i; ++j) tiers[j]->put(*r.entry);
    note_touched(level, d);
    auto unwrapped = unwrap_payload(r.entry->payload);
    if (!unwrapped) {
      ZC_LOG(cache) << "entry " << zc::hex(d).substr(0, 16) << " has no provenance; ignored";
      return std::nullopt;
    }
    r.entry->payload = std::move(unwrapped->second);
    return std::move(r.entry);
  }
  return std::nullopt;
}

void Cache::put(const Key& key, std::vector<uint8_t> payload, double compile_ms) {
  Entry e;
  e.level = key.level();
  e.key = key.digest();
  e.compile_ms = compile_ms;
  e.created_unix = static_cast<uint64_t>(std::time(nullptr));
  e.payload = wrap_payload(provenance(e.level), payload);
  std::vector<Tier*> tiers{memory_.get()};
  if (disk_) tiers.push_back(disk_.get());
  // A read-only remote tier is left out rather than failing: that is not worth a warning.
  if (remote_ && !config_.remote_read_only) tiers.push_back(remote_.get());
  for (Tier* t : tiers) {
    PutResult r = t->put(e);
    std::string name = std::string(level_name(e.level)) + "/" + t->name();
    bool warn = false;
    {
      std::lock_guard lock(mu_);
      TierCounters* c = nullptr;
      for (auto& [n, v] : counters_) {
        if (n == name) c = &v;
      }
      if (!c) c = &counters_.emplace_back(name, TierCounters{}).second;
      if (r.ok) {
        ++c->puts;
        c->bytes_written += static_cast<int64_t>(e.payload.size() + kEntryHeaderSize);
      } else {
        ++c->put_failures;
        warn = !warned_put_failure_;
        warned_put_failure_ = true;
      }
    }
    if (warn) {
      std::fprintf(stderr,
                   "[zc] warning: cannot write to the %s cache (%s); compiling goes on "
                   "without persisting its results\n",
                   t->name().c_str(), r.reason.c_str());
    }
    ZC_LOG(cache) << "store " << level_name(e.level) << " " << t->name() << " "
                  << (r.ok ? "ok" : "failed (" + r.reason + ")")
                  << " key=" << zc::hex(e.key).substr(0, 16) << " " << e.payload.size() << " bytes";
  }
  note_touched(e.level, e.key);
}

Cache::Flight Cache::begin_flight(const Key& key) {
  Flight f;
  auto* redis = dynamic_cast<RedisTier*>(remote_.get());
  if (!redis || config_.remote_read_only || config_.remote_lock_ms <= 0) return f;
  const Level level = key.level();
  const Digest d = key.digest();
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::steady_clock::now();
  const std::string token = zc::hex(sha256(std::to_string(getpid()) + ":" +
                                           std::to_string(now.time_since_epoch().count()) + ":" +
                                           std::to_string(counter++)))
                                .substr(0, 32);
  const auto deadline = now + std::chrono::milliseconds(config_.remote_lock_ms);
  bool check_first = false;
  for (bool waited = false;; waited = true) {
    RedisTier::LockState state = redis->try_lock(level, d, token, config_.remote_lock_ms);
    if (state == RedisTier::LockState::unavailable) return f;
    if (state == RedisTier::LockState::acquired) {
      // The previous holder may have stored the entry and released the lock between this
      // process's lookup and its lock: look once more rather than compile it again.
      f.token = token;
      check_first = true;
    } else if (!waited) {
      ZC_LOG(cache) << "waiting for another process compiling " << level_name(level)
                    << " key=" << zc::hex(d).substr(0, 16);
    }
    if (!check_first) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ZC_LOG(cache) << "gave up waiting for " << level_name(level)
                      << " key=" << zc::hex(d).substr(0, 16) << "; compiling";
        return f;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Polls are not counted as misses: they would drown the lookups that matter.
    GetResult r = redis->get(level, d);
    if (r.outcome != Outcome::hit) {
      if (check_first) return f;  // the lock is ours: the caller compiles
      continue;
    }
    if (check_first) {
      redis->unlock(level, d, token);
      f.token.clear();
    }
    count(level, redis->name(), Outcome::hit, r.entry->compile_ms);
    memory_->put(*r.entry);
    if (disk_) disk_->put(*r.entry);
    note_touched(level, d);
    auto unwrapped = unwrap_payload(r.entry->payload);
    if (!unwrapped) return f;
    r.entry->payload = std::move(unwrapped->second);
    f.entry = std::move(r.entry);
    return f;
  }
}

void Cache::end_flight(const Key& key, const std::string& token) {
  auto* redis = dynamic_cast<RedisTier*>(remote_.get());
  if (redis && !token.empty()) redis->unlock(key.level(), key.digest(), token);
}

bool Cache::contains(Level level, const Digest& key) {
  if (memory_->get(level, key).outcome == Outcome::hit) return true;
  return disk_ && disk_->get(level, key).outcome == Outcome::hit;
}

void Cache::insert(Entry entry) {
  if (disk_) disk_->put(entry);
  memory_->put(entry);
}

Provenance Cache::provenance(Level level) const {
  const Fingerprint& fp = process_fingerprint();
  switch (level) {
    case Level::lowering:
      return Provenance{fp.build_id, "", ""};
    case Level::kernel:
      return Provenance{"", fp.target, fp.toolchain};
    default:
      return Provenance{fp.build_id, fp.target, fp.toolchain};
  }
}

std::vector<BundleItem> Cache::touched_items() {
  std::vector<std::pair<Level, Digest>> touched;
  {
    std::lock_guard lock(mu_);
    touched = touched_;
  }
  std::vector<BundleItem> items;
  for (const auto& [level, key] : touched) {
    std::vector<Tier*> tiers{memory_.get()};
    if (disk_) tiers.push_back(disk_.get());
    for (Tier* t : tiers) {
      GetResult r = t->get(level, key);
      if (r.outcome == Outcome::hit) {
        auto unwrapped = unwrap_payload(r.entry->payload);
        if (unwrapped)
          items.push_back(BundleItem{std::move(*r.entry), std::move(unwrapped->first)});
        break;
      }
    }
  }
  return items;
}

void Cache::flush_lifetime_stats() {
  if (!disk_) return;
  LifetimeDelta delta;
  bool any = false;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, now] : counters_) {
      if (name.size() < 5 || name.substr(name.size() - 5) != "/disk") continue;
      std::optional<Level> level = level_from_name(name.substr(0, name.size() - 5));
      if (!level) continue;
      TierCounters before;
      for (const auto& [n, v] : flushed_->counters) {
        if (n == name) before = v;
      }
      delta.add(*level, now.hits - before.hits, now.misses - before.misses,
                now.errors - before.errors, now.puts - before.puts, now.saved_ms - before.saved_ms,
                now.bytes_written - before.bytes_written);
      any = any || now.hits != before.hits || now.misses != before.misses ||
            now.errors != before.errors || now.puts != before.puts;
    }
    flushed_->counters = counters_;
  }
  if (any) disk_->add_lifetime(delta);
}

std::vector<BundleItem> store_items(Cache& c) {
  std::vector<BundleItem> items;
  if (!c.disk()) return items;
  for (const TierListing& l : c.disk()->list()) {
    GetResult r = c.disk()->get(l.info.level, l.info.key);
    if (r.outcome != Outcome::hit) continue;
    auto unwrapped = unwrap_payload(r.entry->payload);
    if (unwrapped) items.push_back(BundleItem{std::move(*r.entry), std::move(unwrapped->first)});
  }
  return items;
}

Cache& process_cache() {
  static Cache* cache = [] {
    auto* c = new Cache(CacheConfig::from_env());
    // Lifetime statistics are merged into the store once, when the process ends.
    std::atexit([] { process_cache().flush_lifetime_stats(); });
    return c;
  }();
  return *cache;
}

}  // namespace zc::cache
