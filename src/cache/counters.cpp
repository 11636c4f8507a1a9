#include "cache/counters.h"

namespace zc::cache {

void TierCounters::add(const TierCounters& o) {
  hits += o.hits;
  misses += o.misses;
  errors += o.errors;
  puts += o.puts;
  put_failures += o.put_failures;
  bytes_written += o.bytes_written;
  saved_ms += o.saved_ms;
}

void CounterSnapshot::add(const CounterSnapshot& o) {
  for (size_t i = 0; i < counters.size(); ++i) counters[i].add(o.counters[i]);
}

CounterSnapshot CounterTable::snapshot() const {
  std::lock_guard lock(mu_);
  return CounterSnapshot{now_};
}

void CounterTable::count_lookup(CounterKey key, Outcome outcome, double saved_ms) {
  std::lock_guard lock(mu_);
  TierCounters& c = now_[index(key)];
  if (outcome == Outcome::hit) {
    ++c.hits;
    c.saved_ms += saved_ms;
  } else if (outcome == Outcome::miss) {
    ++c.misses;
  } else {
    ++c.errors;
  }
}

void CounterTable::count_put(CounterKey key, bool ok, int64_t bytes) {
  std::lock_guard lock(mu_);
  TierCounters& c = now_[index(key)];
  if (ok) {
    ++c.puts;
    c.bytes_written += bytes;
  } else {
    ++c.put_failures;
  }
}

TierCounters CounterTable::get(CounterKey key) const {
  std::lock_guard lock(mu_);
  return now_[index(key)];
}

std::optional<LifetimeDelta> CounterTable::take_unflushed(TierKind tier) {
  LifetimeDelta delta;
  bool any = false;
  std::lock_guard lock(mu_);
  for (Level level : kLevels) {
    const size_t i = index({level, tier});
    const TierCounters& now = now_[i];
    const TierCounters& before = flushed_[i];
    delta.add(level, now.hits - before.hits, now.misses - before.misses, now.errors - before.errors,
              now.puts - before.puts, now.saved_ms - before.saved_ms,
              now.bytes_written - before.bytes_written);
    any = any || now.hits != before.hits || now.misses != before.misses ||
          now.errors != before.errors || now.puts != before.puts;
    flushed_[i] = now;
  }
  if (!any) return std::nullopt;
  return delta;
}

}  // namespace zc::cache
