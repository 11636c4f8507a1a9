#include "cache/redis_tier.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>

#include "util/log.h"
#include "zc/error.h"

namespace zc::cache {

namespace {

constexpr char kSignedMagic[4] = {'z', 'c', 's', '1'};
constexpr size_t kMacSize = 32;
constexpr size_t kSignedPrefix = sizeof kSignedMagic + kMacSize;
constexpr const char* kUrlForm =
    "expected redis://[user:password@]host[:port][/db], e.g. ZC_REMOTE_CACHE=redis://"
    "127.0.0.1:6379/0";

// The URL with any user information hidden: error messages end up in logs.
std::string masked(const std::string& url) {
  size_t scheme = url.find("://");
  size_t at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  return url.substr(0, scheme + 3) + "***@" + url.substr(at + 1);
}

[[noreturn]] void bad_url(const std::string& url, const std::string& why) {
  throw Error("ZC_REMOTE_CACHE=\"" + masked(url) + "\": " + why + "; " + kUrlForm);
}

std::optional<long> digits(std::string_view s, long max) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  long v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v <= max ? std::optional<long>(v) : std::nullopt;
}

std::string percent_decode(const std::string& url, std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    auto nibble = [](char ch) {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
      return -1;
    };
    int hi = i + 2 < s.size() ? nibble(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? nibble(s[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      bad_url(url, "a '%' in the user information is not followed by two hex digits");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

timeval to_timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

// Blocks SIGPIPE in this thread while talking to the server and swallows one raised meanwhile:
// writing to a connection the server has closed would otherwise end the process, and hiredis
// writes without MSG_NOSIGNAL.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

std::string_view as_view(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::string key_name(Level level, const Digest& key) {
  return std::string("zc:v1:") + level_name(level) + ":" + hex(key);
}

std::string lock_name(Level level, const Digest& key) {
  return std::string("zc:v1:lock:") + level_name(level) + ":" + hex(key);
}

// The MAC covers the key name too, so a signed value cannot be replayed under another key.
Digest value_mac(std::span<const uint8_t> hmac_key, std::string_view name,
                 std::span<const uint8_t> entry) {
  static const uint8_t kSeparator = 0;
  return hmac_sha256(
      hmac_key,
      {{reinterpret_cast<const uint8_t*>(name.data()), name.size()}, {&kSeparator, 1}, entry});
}

class RedisTier final : public Tier {
 public:
  explicit RedisTier(RedisOptions o) : o_(std::move(o)), display_(redis_display_url(o_)) {}
  ~RedisTier() override { drop(); }

  TierKind kind() const override { return TierKind::remote; }
  std::string name() const override { return "redis"; }

  GetResult get(Level level, const Digest& key) override {
    GetResult r;
    r.outcome = Outcome::error;
    const std::string name = key_name(level, key);
    std::string value;
    {
      std::lock_guard lock(mu_);
      Reply reply = command(&r.reason, {"GET", name});
      if (!reply) return r;
      if (!take_value(reply.get(), &value, &r)) return r;
    }
    return decode_value(level, key, name, value);
  }

  std::vector<GetResult> get_many(Level level, std::span<const Digest> keys) override {
    std::vector<GetResult> out(keys.size());
    if (keys.empty()) return out;
    std::vector<std::string> names;
    for (const Digest& k : keys) names.push_back(key_name(level, k));
    std::vector<std::string_view> args{"MGET"};
    args.insert(args.end(), names.begin(), names.end());
    std::vector<std::string> values(keys.size());
    {
      std::lock_guard lock(mu_);
      std::string why;
      Reply reply = command(&why, args);
      if (reply && (reply->type != REDIS_REPLY_ARRAY || reply->elements != keys.size())) {
        why = "unexpected reply to MGET";
        reply.reset();
      }
      for (size_t i = 0; i < keys.size(); ++i) {
        out[i].outcome = Outcome::error;
        if (!reply) {
          out[i].reason = why;
        } else if (take_value(reply->element[i], &values[i], &out[i])) {
          out[i].outcome = Outcome::hit;  // decoded below, outside the lock
        }
      }
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      if (out[i].outcome == Outcome::hit)
        out[i] = decode_value(level, keys[i], names[i], values[i]);
    }
    return out;
  }

  PutResult put(const Entry& e) override {
    if (o_.read_only) return {false, "the remote cache is read-only (ZC_REMOTE_CACHE_READONLY)"};
    const std::string name = key_name(e.level, e.key);
    std::vector<uint8_t> value;
    std::vector<uint8_t> encoded = encode_entry(e);
    if (!o_.hmac_key.empty()) {
      Digest mac = value_mac(o_.hmac_key, name, encoded);
      value.reserve(kSignedPrefix + encoded.size());
      value.insert(value.end(), kSignedMagic, kSignedMagic + sizeof kSignedMagic);
      value.insert(value.end(), mac.begin(), mac.end());
      value.insert(value.end(), encoded.begin(), encoded.end());
    } else {
      value = std::move(encoded);
    }
    const std::string ttl = std::to_string(o_.ttl_seconds);
    PutResult r;
    std::lock_guard lock(mu_);
    Reply reply = o_.ttl_seconds ? command(&r.reason, {"SET", name, as_view(value), "EX", ttl})
                                 : command(&r.reason, {"SET", name, as_view(value)});
    r.ok = reply != nullptr;
    return r;
  }

  LockState try_lock(Level level, const Digest& key, const std::string& token,
                     int lock_ms) override {
    if (o_.read_only) return LockState::unavailable;
    std::string why;
    std::lock_guard lock(mu_);
    Reply r =
        command(&why, {"SET", lock_name(level, key), token, "NX", "PX", std::to_string(lock_ms)});
    if (!r) return LockState::unavailable;
    return r->type == REDIS_REPLY_NIL ? LockState::held : LockState::acquired;
  }

  void unlock(Level level, const Digest& key, const std::string& token) override {
    if (o_.read_only) return;
    // Compare and delete in one step on the server.
    static constexpr const char* kScript =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
        "else return 0 end";
    std::string why;
    std::lock_guard lock(mu_);
    command(&why, {"EVAL", kScript, "1", lock_name(level, key), token});
  }

  std::vector<TierListing> list() override {
    std::vector<TierListing> out;
    for_each_key([&](const std::string& k) {
      std::string why;
      Reply head =
          command(&why, {"GETRANGE", k, "0", std::to_string(kSignedPrefix + kEntryHeaderSize - 1)});
      if (!head || head->type != REDIS_REPLY_STRING) return;
      std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(head->str), head->len);
      if (b.size() >= kSignedPrefix && std::memcmp(b.data(), kSignedMagic, 4) == 0)
        b = b.subspan(kSignedPrefix);
      if (b.size() < kEntryHeaderSize) return;
      std::optional<EntryInfo> info = peek_entry(b.first(kEntryHeaderSize), &why);
      if (!info) return;
      Reply len = command(&why, {"STRLEN", k});
      uint64_t stored = len && len->type == REDIS_REPLY_INTEGER ? len->integer : 0;
      out.push_back(TierListing{*info, stored, k});
    });
    return out;
  }

  uint64_t clear() override {
    if (o_.read_only) return 0;
    uint64_t removed = 0;
    for_each_key([&](const std::string& k) {
      std::string why;
      Reply r = command(&why, {"DEL", k});
      if (r && r->type == REDIS_REPLY_INTEGER) removed += r->integer;
    });
    return removed;
  }

 private:
  // Calls fn(key) for every entry key, holding the lock.
  template <typename Fn>
  void for_each_key(Fn fn) {
    std::lock_guard lock(mu_);
    std::string cursor = "0", why;
    do {
      Reply r = command(&why, {"SCAN", cursor, "MATCH", "zc:v1:*", "COUNT", "1000"});
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY)
        return;
      cursor.assign(r->element[0]->str, r->element[0]->len);
      for (size_t i = 0; i < r->element[1]->elements; ++i) {
        const redisReply* k = r->element[1]->element[i];
        if (k->type != REDIS_REPLY_STRING) continue;
        std::string name(k->str, k->len);
        if (name.rfind("zc:v1:lock:", 0) == 0) continue;
        fn(name);
      }
    } while (cursor != "0");
  }

  // A GET reply's value into *value; false with *r set to a miss (nil) or an error otherwise.
  static bool take_value(const redisReply* reply, std::string* value, GetResult* r) {
    if (reply->type == REDIS_REPLY_NIL) {
      r->outcome = Outcome::miss;
      return false;
    }
    if (reply->type != REDIS_REPLY_STRING) {
      r->outcome = Outcome::error;
      r->reason = "unexpected reply type " + std::to_string(reply->type) + " to GET";
      return false;
    }
    value->assign(reply->str, reply->len);
    return true;
  }

  // A stored value, unsigned and decoded: a hit, or an error saying why it must not be used.
  GetResult decode_value(Level level, const Digest& key, std::string_view name,
                         const std::string& value) {
    GetResult r;
    r.outcome = Outcome::error;
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(value.data()), value.size());
    std::optional<std::span<const uint8_t>> entry = unsign(name, bytes, &r.reason);
    if (!entry) {
      warn_refused(r.reason);
      return r;
    }
    // A corrupt value is not deleted here: the recompile it causes writes a good one over it.
    r.entry = decode_entry(*entry, level, &key, &r.reason);
    if (r.entry) r.outcome = Outcome::hit;
    return r;
  }

  // The entry inside a stored value, checked against the HMAC key; nullopt with *why set when
  // the value must not be used.
  std::optional<std::span<const uint8_t>> unsign(std::string_view name,
                                                 std::span<const uint8_t> bytes,
                                                 std::string* why) const {
    bool is_signed =
        bytes.size() >= sizeof kSignedMagic && std::memcmp(bytes.data(), kSignedMagic, 4) == 0;
    if (is_signed && bytes.size() < kSignedPrefix) {
      *why = "truncated signature";
      return std::nullopt;
    }
    if (o_.hmac_key.empty()) return is_signed ? bytes.subspan(kSignedPrefix) : bytes;
    if (!is_signed) {
      *why = "unsigned value refused: an HMAC key is configured (ZC_CACHE_HMAC_KEY_FILE)";
      return std::nullopt;
    }
    std::span<const uint8_t> entry = bytes.subspan(kSignedPrefix);
    Digest mac = value_mac(o_.hmac_key, name, entry);
    if (!equal_constant_time(mac, bytes.subspan(sizeof kSignedMagic, kMacSize))) {
      *why = "bad signature: the value does not verify with the configured HMAC key";
      return std::nullopt;
    }
    return entry;
  }

  void warn_refused(const std::string& why) {
    std::lock_guard lock(mu_);
    if (warned_refused_) return;
    warned_refused_ = true;
    std::fprintf(stderr,
                 "[zc] warning: remote cache %s: %s; the entry is compiled locally instead "
                 "(further refusals are counted as errors, ZC_LOGS=cache shows them)\n",
                 display_.c_str(), why.c_str());
  }

  void drop() {
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
  }

  // A failed exchange: the connection is dropped (a timed-out reply would otherwise arrive as
  // the answer to the next command), and enough of them in a row open the breaker.
  void failed(const std::string& why, bool drop_connection) {
    if (drop_connection) drop();
    // Not reset when the breaker opens: after it closes, one more failure reopens it at once.
    if (++failures_ < o_.breaker_failures) return;
    drop();
    open_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.breaker_open_ms);
    if (!warned_breaker_) {
      warned_breaker_ = true;
      std::fprintf(stderr,
                   "[zc] warning: remote cache: %s; %d failures in a row, so it is not "
                   "contacted for %.1f s; compiling goes on with the local caches\n",
                   why.c_str(), failures_, o_.breaker_open_ms / 1000.0);
    }
  }

  // Sends one command on the current connection; null with *why set on failure. Holds mu_.
  Reply send(std::string* why, std::initializer_list<std::string_view> args) {
    return send(why, std::span<const std::string_view>(args.begin(), args.size()));
  }
  Reply send(std::string* why, std::span<const std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisReply* raw = nullptr;
    int error = 0;
    {
      SigpipeGuard guard;
      raw = static_cast<redisReply*>(
          redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
      error = errno;
    }
    if (!raw) {
      *why = display_ + ": " + (ctx_->errstr[0] ? ctx_->errstr : "connection lost");
      if (ctx_->err == REDIS_ERR_IO && (error == EAGAIN || error == EWOULDBLOCK))
        *why = display_ + ": no reply within " + std::to_string(o_.command_timeout_ms) + " ms";
      failed(*why, true);
      return nullptr;
    }
    Reply reply(raw);
    if (reply->type == REDIS_REPLY_ERROR) {
      // The server answers but refuses (NOAUTH, OOM, a read-only replica): as useless as no
      // server, so it counts toward the breaker, but the connection is fine.
      *why = display_ + ": server error: " + std::string(reply->str, reply->len);
      failed(*why, false);
      return nullptr;
    }
    return reply;
  }

  bool connect(std::string* why) {
    if (ctx_) return true;
    if (std::chrono::steady_clock::now() < open_until_) {
      *why = "skipped: " + display_ + " failed " + std::to_string(failures_) +
             " times in a row; retried " + std::to_string(o_.breaker_open_ms / 1000) +
             " s after the last failure";
      return false;
    }
    redisContext* c = nullptr;
    {
      SigpipeGuard guard;
      c = redisConnectWithTimeout(o_.host.c_str(), o_.port, to_timeval(o_.connect_timeout_ms));
    }
    if (!c || c->err) {
      *why = "cannot connect to " + display_ + ": " + (c ? c->errstr : "out of memory");
      if (c) redisFree(c);
      failed(*why, false);
      return false;
    }
    ctx_ = c;
    if (redisSetTimeout(ctx_, to_timeval(o_.command_timeout_ms)) != REDIS_OK) {
      *why = "cannot set the command timeout on " + display_;
      failed(*why, true);
      return false;
    }
    if (!o_.password.empty()) {
      Reply r = o_.user.empty() ? send(why, {"AUTH", o_.password})
                                : send(why, {"AUTH", o_.user, o_.password});
      if (!r) {
        drop();
        return false;
      }
    }
    if (o_.db != 0) {
      if (!send(why, {"SELECT", std::to_string(o_.db)})) {
        drop();
        return false;
      }
    }
    return true;
  }

  void connect_now() override {
    std::lock_guard lock(mu_);
    std::string why;
    connect(&why);
  }

  Reply command(std::string* why, std::span<const std::string_view> args) {
    if (!connect(why)) return nullptr;
    Reply r = send(why, args);
    if (r) failures_ = 0;
    return r;
  }
  Reply command(std::string* why, std::initializer_list<std::string_view> args) {
    return command(why, std::span<const std::string_view>(args.begin(), args.size()));
  }

  const RedisOptions o_;
  const std::string display_;
  std::mutex mu_;
  redisContext* ctx_ = nullptr;
  int failures_ = 0;
  std::chrono::steady_clock::time_point open_until_{};
  bool warned_breaker_ = false, warned_refused_ = false;
};

}  // namespace

RedisOptions parse_redis_url(const std::string& url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) bad_url(url, "not a redis:// URL");
  std::string rest = url.substr(scheme.size());
  RedisOptions o;
  size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (colon == std::string::npos)
      bad_url(url, "the user information must be user:password or :password");
    o.user = percent_decode(url, std::string_view(userinfo).substr(0, colon));
    o.password = percent_decode(url, std::string_view(userinfo).substr(colon + 1));
    if (o.password.empty()) bad_url(url, "the password is empty");
  }
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {
    size_t close = hostport.find(']');
    if (close == std::string::npos) bad_url(url, "an IPv6 host has no closing ']'");
    o.host = hostport.substr(1, close - 1);
    std::string after = hostport.substr(close + 1);
    if (!after.empty() && after[0] != ':') bad_url(url, "unexpected text after the host");
    if (!after.empty()) port = after.substr(1);
    if (after == ":") bad_url(url, "the port is empty");
  } else {
    size_t colon = hostport.rfind(':');
    o.host = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) bad_url(url, "the port is empty");
    }
    if (o.host.find(':') != std::string::npos)
      bad_url(url, "an IPv6 host must be in brackets, e.g. redis://[::1]:6379");
  }
  if (o.host.empty()) bad_url(url, "no host");
  if (!port.empty()) {
    std::optional<long> p = digits(port, 65535);
    if (!p || *p == 0) bad_url(url, "port \"" + port + "\" is not a number from 1 to 65535");
    o.port = static_cast<int>(*p);
  }
  if (slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    if (!db.empty()) {
      std::optional<long> d = digits(db, 65535);
      if (!d) bad_url(url, "database \"" + db + "\" is not a number");
      o.db = static_cast<int>(*d);
    }
  }
  return o;
}

std::string redis_display_url(const RedisOptions& o) {
  std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  std::string auth = o.password.empty() ? "" : (o.user.empty() ? ":***@" : o.user + ":***@");
  return "redis://" + auth + host + ":" + std::to_string(o.port) + "/" + std::to_string(o.db);
}

std::unique_ptr<Tier> make_redis_tier(const RedisOptions& options) {
  return std::make_unique<RedisTier>(options);
}

}  // namespace zc::cache
