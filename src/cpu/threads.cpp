#include "cpu/threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "util/env.h"
#include "zc/error.h"

namespace zc::cpu {

namespace {

std::atomic<int> g_in_flight{0};
// Initial-exec: read at an offset from the thread pointer instead of through __tls_get_addr
// (libzc is a shared library), as libgomp's own are; every compiled call's kernel reads them.
// Eight bytes of the static TLS that glibc keeps for libraries loaded later (dlopen).
[[gnu::tls_model("initial-exec")]] thread_local int t_depth = 0;  // shares alive on this thread
[[gnu::tls_model("initial-exec")]] thread_local int t_team = 0;   // its team while one is
// The outermost share's: the thread's team before it, and the calls in flight at its last
// refresh with the share that gave (-1: none yet).
[[gnu::tls_model("initial-exec")]] thread_local int t_entry_team = 0;
[[gnu::tls_model("initial-exec")]] thread_local int t_seen_calls = -1;
[[gnu::tls_model("initial-exec")]] thread_local int t_share = 0;

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
    const std::optional<std::string> value = env::get(env::Var::num_threads);
    std::optional<int> n = parse_num_threads(value ? value->c_str() : nullptr);
    return n ? *n : std::max(1, omp_get_max_threads());
  }();
  return threads;
}

int team_share(int threads, int calls) {
  return std::max(1, threads / std::max(1, calls));
}

CpuCallShare::CpuCallShare() {
  if (t_depth > 0) {
    ++t_depth;
    return;
  }
  cpu_threads();  // a malformed ZC_NUM_THREADS fails here, before the call is counted
  ++t_depth;
  g_in_flight.fetch_add(1, std::memory_order_relaxed);
  t_entry_team = omp_get_max_threads();
  t_team = t_entry_team;
  t_seen_calls = -1;
}

CpuCallShare::~CpuCallShare() {
  if (--t_depth > 0) return;
  g_in_flight.fetch_sub(1, std::memory_order_relaxed);
  // The caller's own OpenMP setting comes back for its own parallel code.
  if (t_team != t_entry_team) omp_set_num_threads(t_entry_team);
}

int CpuCallShare::refresh() {
  // Before every kernel of a call: nothing to do while the calls in flight stay as they were.
  const int calls = g_in_flight.load(std::memory_order_relaxed);
  if (calls == t_seen_calls) return t_share;
  t_seen_calls = calls;
  t_share = team_share(cpu_threads(), calls);
  if (t_share != t_team) {
    omp_set_num_threads(t_share);
    t_team = t_share;
  }
  return t_share;
}

int CpuCallShare::calls_in_flight() {
  return g_in_flight.load(std::memory_order_relaxed);
}

int work_team(int team, int64_t multiply_adds) {
  return multiply_adds < kOneThreadWork ? 1 : std::max(1, team);
}

WorkTeam::WorkTeam(int64_t multiply_adds) : before_(omp_get_max_threads()) {
  threads_ = work_team(before_, multiply_adds);
  if (threads_ != before_) omp_set_num_threads(threads_);
}

WorkTeam::~WorkTeam() {
  if (threads_ != before_) omp_set_num_threads(before_);
}

}  // namespace zc::cpu
