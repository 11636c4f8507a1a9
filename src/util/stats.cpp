#include "util/stats.h"

#include <atomic>

namespace zc::stats {

namespace {
struct Store {
  std::atomic<int64_t> counters[static_cast<int>(Counter::count)] = {};
  // Times in nanoseconds so they can be atomic integers.
  std::atomic<int64_t> times_ns[static_cast<int>(Stage::count)] = {};
};
Store& store() {
  static Store s;
  return s;
}
}  // namespace

void add(Counter c, int64_t n) {
  store().counters[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
}
void add_time(Stage s, double ms) {
  store().times_ns[static_cast<int>(s)].fetch_add(static_cast<int64_t>(ms * 1e6),
                                                  std::memory_order_relaxed);
}

int64_t read(Counter c) {
  return store().counters[static_cast<int>(c)].load(std::memory_order_relaxed);
}
double read_ms(Stage s) {
  return static_cast<double>(store().times_ns[static_cast<int>(s)].load()) / 1e6;
}
void reset() {
  for (auto& v : store().counters) v = 0;
  for (auto& v : store().times_ns) v = 0;
}

}  // namespace zc::stats
