#include "ops/cpu_threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "zc/error.h"

namespace zc::ops {

namespace {

std::atomic<int> g_in_flight{0};
// Initial-exec: read at an offset from the thread pointer instead of through __tls_get_addr
// (libzc is a shared library), as libgomp's own are; every compiled call's kernel reads them.
// Eight bytes of the static TLS that glibc keeps for libraries loaded later (dlopen).
[[gnu::tls_model("initial-exec")]] thread_local int t_depth = 0;  // shares alive on this thread
[[gnu::tls_model("initial-exec")]] thread_local int t_team = 0;   // its team while one is

}  // namespace

std::optional<int> parse_num_threads(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long n = std::strtol(value, &end, 10);
  const bool digits = *value >= '0' && *value <= '9';  // strtol would skip spaces and signs
  if (!digits || end == value || *end != '\0' || errno != 0 || n < 1 || n > 4096) {
    throw Error(std::string("ZC_NUM_THREADS=\"") + value +
                "\" is not a thread count; expected a positive integer, e.g. ZC_NUM_THREADS=8");
  }
  return static_cast<int>(n);
}

int cpu_threads() {
  // OpenMP's count is read on the first call's thread before any share is set there.
  static const int threads = [] {
    std::optional<int> n = parse_num_threads(std::getenv("ZC_NUM_THREADS"));
    return n ? *n : std::max(1, omp_get_max_threads());
  }();
  return threads;
}

int team_share(int threads, int calls) {
  return std::max(1, threads / std::max(1, calls));
}

CpuCallShare::CpuCallShare() : outermost_(t_depth == 0) {
  threads_ = cpu_threads();  // a malformed ZC_NUM_THREADS fails here, before the call is counted
  ++t_depth;
  if (outermost_) {
    g_in_flight.fetch_add(1, std::memory_order_relaxed);
    entry_team_ = omp_get_max_threads();
    t_team = entry_team_;
  }
}

CpuCallShare::~CpuCallShare() {
  --t_depth;
  if (!outermost_) return;
  g_in_flight.fetch_sub(1, std::memory_order_relaxed);
  // The caller's own OpenMP setting comes back for its own parallel code.
  if (t_team != entry_team_) omp_set_num_threads(entry_team_);
}

int CpuCallShare::refresh() {
  // Before every kernel of a call: nothing to do while the calls in flight stay as they were.
  const int calls = g_in_flight.load(std::memory_order_relaxed);
  if (calls == seen_calls_) return team_;
  seen_calls_ = calls;
  team_ = team_share(threads_, calls);
  if (team_ != t_team) {
    omp_set_num_threads(team_);
    t_team = team_;
  }
  return team_;
}

int CpuCallShare::calls_in_flight() {
  return g_in_flight.load(std::memory_order_relaxed);
}

}  // namespace zc::ops
