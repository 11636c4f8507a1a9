// The remote tier: a Redis server shared by many machines, so one machine's compile makes every
// other machine warm.
//
// Keys are "zc:v1:<level>:<key hex>"; values are encoded entries (entry.h), verified on read
// against the level and key asked for. With an HMAC key, a value is "zcs1", an HMAC-SHA256 over
// the Redis key name and the entry, then the entry; a reader with a key refuses unsigned and
// badly signed values, because whoever can write to the server could otherwise make every
// reader load machine code. A reader without a key accepts signed values unverified (the entry
// checksums still catch corruption), like bundles.
//
// Latency is bounded: connecting and every command have timeouts, and after
// `breaker_failures` consecutive failures (refused, timed out, dropped, AUTH refused) the
// server is not contacted for `breaker_open_ms`; lookups in that time are errors that cost
// nothing. A dead or slow server thus costs at most a few timeouts per process, never a hang.
// Failures are errors with a reason, never misses, so a broken server shows in the counters.
// Nothing here throws, and a server that drops the connection cannot kill the process with
// SIGPIPE.
//
// One connection, serialized by a mutex: Redis answers in well under a millisecond, far less
// than any compile it saves.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/tier.h"

namespace zc::cache {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user;          // empty: AUTH with the password alone
  std::string password;      // empty: no AUTH
  uint64_t ttl_seconds = 0;  // 0: entries do not expire
  bool read_only = false;    // never writes: for readers that must not be trusted to
  int connect_timeout_ms = 200;
  int command_timeout_ms = 500;
  std::vector<uint8_t> hmac_key;  // empty: values are neither signed nor verified
  int breaker_failures = 3;
  int breaker_open_ms = 30000;
};

// Parses "redis://[user:pass@]host[:port][/db]" (port 6379 and db 0 by default; user and
// password percent-decoded; an IPv6 host in brackets). Raises zc::Error naming
// ZC_REMOTE_CACHE and the expected form when `url` does not have it.
RedisOptions parse_redis_url(const std::string& url);

// The server as the URL names it, without the password (for messages and `zc cache stats`).
std::string redis_display_url(const RedisOptions& o);

// Connects lazily, at the first lookup: making the tier never blocks. Besides get and put, the
// tier offers compile locks for single flight across machines (SET
// zc:v1:lock:<level>:<key hex> <token> NX PX <lock_ms>, released by a compare-and-delete
// script; none in read-only mode), get_many as one MGET (a failure makes every result an
// error), and connect_now.
std::unique_ptr<Tier> make_redis_tier(const RedisOptions& options);

}  // namespace zc::cache
