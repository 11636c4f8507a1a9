// The CPU threads zc's parallel work runs on. Generated loops, eager kernels and both GEMM
// libraries (cpu/blas.h) run on libgomp's one pool and size their teams by OpenMP's
// omp_get_max_threads(), so one number governs them all: ZC_NUM_THREADS when set, else
// OpenMP's own (OMP_NUM_THREADS, else the cores the process may run on).
//
// Calls from several threads at once share that number instead of each taking all of it:
// a compiled call holds a CpuCallShare, and before each of its kernels sets its thread's team
// to the pool divided by the calls in flight (at least one thread), so four callers on a
// 16-thread pool run four threads each, and a caller left alone takes the pool back at its
// next kernel. Without it every caller starts a full team and the machine is oversubscribed
// (N callers x 16 threads on 16 cores), which costs more than the parallelism gains.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace zc::cpu {

// The pool's size for this process: ZC_NUM_THREADS, else OpenMP's, read once. Raises
// zc::Error naming the variable when ZC_NUM_THREADS is not a positive integer.
int cpu_threads();

// ZC_NUM_THREADS's value: nullopt when unset or empty; raises zc::Error for anything but a
// positive integer (exposed for the tests).
std::optional<int> parse_num_threads(const char* value);

// The team of one call among `calls` in flight on a pool of `threads`.
int team_share(int threads, int calls);

// One call's claim on the pool, for its lifetime (compiled calls, and eager ops on the CPU).
// Nested calls on the same thread (a hierarchical graph's parts, an extern op inside a
// compiled graph) count once: only the outermost counts itself in flight, and when it ends
// the thread's OpenMP team is the caller's own again. What a claim knows is its thread's (one
// outermost claim per thread at a time), so a nested claim is a count and costs nothing else:
// seed64's call makes 65 of them.
class CpuCallShare {
 public:
  CpuCallShare();
  ~CpuCallShare();
  CpuCallShare(const CpuCallShare&) = delete;
  CpuCallShare& operator=(const CpuCallShare&) = delete;

  // Sets this thread's OpenMP team to the current share; returns it.
  int refresh();
  // The calls in flight in this process now.
  static int calls_in_flight();
};

// Multiply-adds below which one library call (a convolution, a product) runs on one thread
// instead of the whole team: waking threads and joining them costs microseconds that a small
// call's work does not repay (MobileNetV3's convolutions at 32x32 took 2.5-17.5 us on one
// thread and 4.7-35.7 us on two on the 2-core machine, its 2x64x96 product 12 us against 24).
// One thread or all, never a team in between: libgomp ends the pool's threads that a smaller
// team leaves out and creates them again for the next larger one (a team of one leaves the
// pool alone), which made MobileNetV3-S at 224x224 take 15.4 ms a call on the 16-core host
// with teams sized by the work, against 1.5 ms (CpuThreads.TeamsOfOneKeepThePoolsThreads).
inline constexpr int64_t kOneThreadWork = int64_t{1} << 18;

// The threads a call of `multiply_adds` takes out of a team of `team`: one or all.
int work_team(int team, int64_t multiply_adds);

// Sets this thread's OpenMP team to work_team's for one call, and back when it ends.
class WorkTeam {
 public:
  explicit WorkTeam(int64_t multiply_adds);
  ~WorkTeam();
  WorkTeam(const WorkTeam&) = delete;
  WorkTeam& operator=(const WorkTeam&) = delete;

 private:
  int before_, threads_;
};

// body(0) .. body(n - 1) shared out among an OpenMP team (static schedule) when `parallel`,
// else on the calling thread without entering OpenMP at all: `omp parallel for if (false)`
// still costs about 260 ns (libgomp makes a team of one), which a small call paid for every
// loop it ran (an LSTM step's product epilogue, a row reduction over a few rows).
template <class Body>
void parallel_for_if(bool parallel, int64_t n, const Body& body) {
  if (!parallel) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace zc::cpu
