#include "cache/cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "cache/disk_tier.h"
#include "cache/lifetime_stats.h"
#include "cache/redis_tier.h"
#include "util/bytes.h"
#include "util/cache_dir.h"
#include "util/env.h"
#include "util/log.h"

namespace zc::cache {

namespace {

constexpr uint32_t kProvenanceMagic = 0x31766f70;  // "pov1"

using env::Var;

// An unsigned number from the environment, or `fallback` when unset.
uint64_t env_uint(Var var, uint64_t fallback, const char* example) {
  std::string v = env::non_empty(var).value_or("");
  if (v.empty()) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || v[0] == '-') {
    throw Error(std::string(env::name(var)) + "=\"" + v +
                "\" is not a number; expected digits, e.g. " + example);
  }
  return n;
}

}  // namespace

CacheConfig CacheConfig::from_env() {
  CacheConfig c;
  c.persistent = !caches_force_disabled();
  c.dir = configured_cache_dir();
  if (c.dir.empty()) {
    std::fprintf(stderr,
                 "[zc] warning: no HOME and no ZC_CACHE_DIR: compiled graphs are not "
                 "persisted; set ZC_CACHE_DIR to a directory\n");
    c.persistent = false;
  }
  c.max_bytes = env_uint(Var::cache_max_bytes, 0, "ZC_CACHE_MAX_BYTES=1073741824");
  c.hmac_key_file = env::non_empty(Var::cache_hmac_key_file).value_or("");
  c.remote_url = env::non_empty(Var::remote_cache).value_or("");
  if (!c.remote_url.empty()) parse_redis_url(c.remote_url);  // a malformed URL fails here
  c.remote_ttl_seconds = env_uint(Var::remote_cache_ttl, 0, "ZC_REMOTE_CACHE_TTL=604800");
  c.remote_read_only = env::flag(Var::remote_cache_readonly);
  // Capped so a typo cannot turn the bound on a dead server's cost into minutes.
  c.remote_connect_timeout_ms = static_cast<int>(std::min<uint64_t>(
      env_uint(Var::remote_cache_connect_timeout_ms, 200, "ZC_REMOTE_CACHE_CONNECT_TIMEOUT_MS=200"),
      60000));
  c.remote_timeout_ms = static_cast<int>(std::min<uint64_t>(
      env_uint(Var::remote_cache_timeout_ms, 500, "ZC_REMOTE_CACHE_TIMEOUT_MS=500"), 60000));
  c.remote_lock_ms = static_cast<int>(std::min<uint64_t>(
      env_uint(Var::remote_cache_lock_ms, 60000, "ZC_REMOTE_CACHE_LOCK_MS=60000"), 3600000));
  c.local_lock_ms = static_cast<int>(
      std::min<uint64_t>(env_uint(Var::cache_lock_ms, 60000, "ZC_CACHE_LOCK_MS=60000"), 3600000));
  return c;
}

Cache::Cache(CacheConfig config) : config_(std::move(config)) {
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
  if (disk_) disk_writer_ = std::make_unique<WriteBehind>(*disk_);
  SingleFlight::Options flight;
  flight.lock_dir = config_.dir + "/locks";
  flight.local_lock_ms = config_.local_lock_ms;
  flight.remote_lock_ms = config_.remote_lock_ms;
  // A reader that never writes takes no remote lock: others would wait for an entry it never
  // stores.
  Tier* lockable_remote = config_.remote_read_only ? nullptr : remote_.get();
  flights_ = std::make_unique<SingleFlight>(flight, disk_.get(), lockable_remote);
}

Cache::~Cache() = default;

void Cache::drain_disk_writes() {
  if (disk_writer_) disk_writer_->drain();
}

void Cache::stop_writer() {
  if (disk_writer_) disk_writer_->stop();
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

namespace {

// The payload of a stored entry without its provenance, or nullopt (and why) when it has none
// or names another than `want`.
std::optional<std::vector<uint8_t>> usable_payload(const Provenance& want, const Entry& e,
                                                   std::string* why) {
  auto unwrapped = unwrap_payload(e.payload);
  if (!unwrapped) {
    *why = "no provenance";
    return std::nullopt;
  }
  // The key already covers build, target and toolchain, so a mismatch here means a key that
  // missed a component or a hand-edited server: machine code made by another build must not
  // run, whatever key it sits under.
  const Provenance& got = unwrapped->first;
  if (got.build_id != want.build_id) {
    *why = "made by another zc build (" + got.build_id.substr(0, 12) + ")";
  } else if (got.target != want.target) {
    *why = "made for another target";
  } else if (got.toolchain != want.toolchain) {
    *why = "made by another toolchain";
  } else {
    return std::move(unwrapped->second);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Entry> Cache::get(const Key& key, CounterTable* also) {
  Digest d = key.digest();
  Level level = key.level();
  std::vector<Tier*> tiers{memory_.get()};
  if (disk_) tiers.push_back(disk_.get());
  if (remote_) tiers.push_back(remote_.get());
  for (size_t i = 0; i < tiers.size(); ++i) {
    std::optional<GetResult> staged;
    if (tiers[i] == remote_.get()) staged = take_staged(level, d);
    GetResult r = staged ? std::move(*staged) : tiers[i]->get(level, d);
    std::optional<std::vector<uint8_t>> payload;
    if (r.outcome == Outcome::hit) {
      payload = usable_payload(key.provenance(), *r.entry, &r.reason);
      if (!payload) {
        r.outcome = Outcome::error;
        r.entry.reset();
      }
    }
    count_lookup({level, tiers[i]->kind()}, r.outcome, r.entry ? r.entry->compile_ms : 0, also);
    ZC_LOG(cache) << "lookup " << level_name(level) << " " << tiers[i]->name() << " "
                  << (r.outcome == Outcome::hit    ? "hit"
                      : r.outcome == Outcome::miss ? "miss"
                                                   : "error (" + r.reason + ")")
                  << " key=" << zc::hex(d).substr(0, 16) << " " << key.describe();
    if (r.outcome != Outcome::hit) continue;
    // A hit in a slower tier is copied into the faster ones; the disk copy of a remote hit is
    // written behind (a disk write costs more than the rest of a warm lookup).
    for (size_t j = 0; j < i; ++j) {
      if (tiers[j] == disk_.get() && tiers[i] == remote_.get()) {
        disk_writer_->write(*r.entry);
      } else {
        tiers[j]->put(*r.entry);
      }
    }
    note_touched(level, d);
    r.entry->payload = std::move(*payload);
    return std::move(r.entry);
  }
  return std::nullopt;
}

std::optional<GetResult> Cache::take_staged(Level level, const Digest& key) {
  std::lock_guard lock(mu_);
  for (auto it = staged_.begin(); it != staged_.end(); ++it) {
    if (it->first.first == level && it->first.second == key) {
      GetResult r = std::move(it->second);
      staged_.erase(it);
      return r;
    }
  }
  return std::nullopt;
}

void Cache::prefetch(std::span<const Key> keys) {
  if (!remote_ || keys.empty()) return;
  const Level level = keys[0].level();
  std::vector<Digest> wanted;
  for (const Key& k : keys) {
    if (k.level() != level) throw Error("Cache::prefetch: keys of more than one level");
    const Digest d = k.digest();
    // Presence, not a read: the get() that follows reads and checks a local entry.
    if (memory_->contains(level, d) || (disk_ && disk_->contains(level, d))) continue;
    wanted.push_back(d);
  }
  if (wanted.empty()) return;
  std::vector<GetResult> got = remote_->get_many(level, wanted);
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < wanted.size(); ++i) {
    // Errors are not kept: get() asks again, and its failure counts toward the breaker.
    if (got[i].outcome == Outcome::error) continue;
    staged_.emplace_back(std::make_pair(level, wanted[i]), std::move(got[i]));
  }
}

void Cache::put(const Key& key, std::vector<uint8_t> payload, double compile_ms,
                CounterTable* also) {
  store(key, payload, compile_ms, /*disk_behind=*/false, also);
}

void Cache::put_behind(const Key& key, std::vector<uint8_t> payload, double compile_ms,
                       CounterTable* also) {
  store(key, payload, compile_ms, /*disk_behind=*/disk_writer_ != nullptr, also);
}

void Cache::update(const Key& key,
                   const std::function<std::vector<uint8_t>(const std::optional<Entry>&)>& merge,
                   double compile_ms, CounterTable* also) {
  std::lock_guard lock(update_mu_);
  const std::optional<Entry> now = get(key, also);
  put(key, merge(now), compile_ms, also);
}

void Cache::count_lookup(CounterKey key, Outcome outcome, double saved_ms, CounterTable* also) {
  counters_.count_lookup(key, outcome, saved_ms);
  if (also) also->count_lookup(key, outcome, saved_ms);
}

void Cache::store(const Key& key, const std::vector<uint8_t>& payload, double compile_ms,
                  bool disk_behind, CounterTable* also) {
  Entry e;
  e.level = key.level();
  e.key = key.digest();
  e.compile_ms = compile_ms;
  e.created_unix = static_cast<uint64_t>(std::time(nullptr));
  e.payload = wrap_payload(key.provenance(), payload);
  std::vector<Tier*> tiers{memory_.get()};
  if (disk_ && !disk_behind) tiers.push_back(disk_.get());
  // A read-only remote tier is left out rather than failing: that is not worth a warning.
  if (remote_ && !config_.remote_read_only) tiers.push_back(remote_.get());
  for (Tier* t : tiers) {
    PutResult r = t->put(e);
    const int64_t bytes = static_cast<int64_t>(e.payload.size() + kEntryHeaderSize);
    counters_.count_put({e.level, t->kind()}, r.ok, bytes);
    if (also) also->count_put({e.level, t->kind()}, r.ok, bytes);
    if (!r.ok && !warned_put_failure_.exchange(true)) {
      std::fprintf(stderr,
                   "[zc] warning: cannot write to the %s cache (%s); compiling goes on "
                   "without persisting its results\n",
                   t->name().c_str(), r.reason.c_str());
    }
    ZC_LOG(cache) << "store " << level_name(e.level) << " " << t->name() << " "
                  << (r.ok ? "ok" : "failed (" + r.reason + ")")
                  << " key=" << zc::hex(e.key).substr(0, 16) << " " << e.payload.size() << " bytes";
  }
  if (disk_behind) {
    ZC_LOG(cache) << "store " << level_name(e.level)
                  << " disk written behind key=" << zc::hex(e.key).substr(0, 16);
    disk_writer_->write(e);
  }
  note_touched(e.level, e.key);
}

std::optional<Entry> Cache::adopt(Tier& tier, const Key& key, GetResult r, CounterTable* also) {
  const Level level = key.level();
  const Digest d = key.digest();
  auto payload = usable_payload(key.provenance(), *r.entry, &r.reason);
  if (!payload) {
    count_lookup({level, tier.kind()}, Outcome::error, 0, also);
    ZC_LOG(cache) << "lookup " << level_name(level) << " " << tier.name() << " error (" << r.reason
                  << ") key=" << zc::hex(d).substr(0, 16);
    return std::nullopt;
  }
  count_lookup({level, tier.kind()}, Outcome::hit, r.entry->compile_ms, also);
  memory_->put(*r.entry);
  if (disk_ && &tier != disk_.get()) disk_writer_->write(*r.entry);
  note_touched(level, d);
  r.entry->payload = std::move(*payload);
  return std::move(r.entry);
}

Cache::Flight Cache::begin_flight(const Key& key, CounterTable* also) {
  return flights_->begin(key.level(), key.digest(), [&](Tier& tier, GetResult found) {
    return adopt(tier, key, std::move(found), also);
  });
}

void Cache::end_flight(const Key& key, const std::string& token) {
  flights_->end(key.level(), key.digest(), token);
}

std::future<void> Cache::connect_remote_async() {
  Tier* remote = remote_.get();
  if (!remote || remote_connect_started_.exchange(true)) return {};
  return std::async(std::launch::async, [remote] { remote->connect_now(); });
}

bool Cache::contains(Level level, const Digest& key) {
  if (memory_->contains(level, key)) return true;
  drain_disk_writes();
  // Read and checked, not merely present: a bundle's good entry must replace a corrupt file.
  return disk_ && disk_->get(level, key).outcome == Outcome::hit;
}

void Cache::insert(Entry entry) {
  if (disk_) disk_->put(entry);
  memory_->put(entry);
}

std::vector<BundleItem> Cache::touched_items() {
  drain_disk_writes();  // an entry written behind is on disk, should memory have let it go
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
  drain_disk_writes();
  // The store's statistics are those of the disk tier: the other tiers are this process's own.
  if (std::optional<LifetimeDelta> delta = counters_.take_unflushed(TierKind::disk))
    disk_->add_lifetime(*delta);
}

std::vector<BundleItem> store_items(Cache& c) {
  std::vector<BundleItem> items;
  if (!c.disk()) return items;
  c.drain_disk_writes();
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
    // Lifetime statistics are merged into the store once, when the process ends. The flush
    // hashes with util/hash.h's SHA-256, which keeps no OpenSSL state, so it is safe even after
    // OpenSSL's own exit-time cleanup has run.
    // The write-behind thread is ended first: a thread left running into static destruction
    // could use what is being destroyed.
    std::atexit([] {
      process_cache().stop_writer();
      process_cache().flush_lifetime_stats();
    });
    return c;
  }();
  return *cache;
}

}  // namespace zc::cache
