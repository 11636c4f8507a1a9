// Mode::MaxAutotune on the CPU: for each library product of a compiled graph, the way to run
// it (cpu/gemm_choice.h: library, share of the thread team, batch sharing) that measured
// fastest on this machine, timed once per machine and then read from the cache.
//
// Tuning happens when an executable is made, after its code is built or loaded: the source and
// binary are the same in both modes (every product passes its call site's choice), so every
// compile cache level serves both, and only the choices differ. Per distinct problem:
//  - the autotune cache level is asked first, under the problem, the pool's thread count and a
//    record made for this CPU (brand and cpuid words, toolchain::host_cpu_fingerprint) and the
//    GEMM libraries' versions; a hit times nothing, so a warm process, a bundle imported on a
//    same-CPU machine or the Redis tier skip tuning entirely. A record from another CPU or
//    other library versions has another key and is never read.
//  - on a miss every candidate (gemm_candidates; for a product on a weight, also oneDNN's matmul
//    on B kept packed, timed after its one conversion) runs on buffers of the problem's layout,
//    each run after a parallel loop that writes its left operand, as the kernel before it would: a
//    warm-up of at least 2 runs and up to 32 or 50 ms, then 5 timed runs; its time is the
//    median. Candidates are tried in a fixed order, the default first; one whose first run is
//    3x slower than the best so far stops there; a later one wins only when its median is at
//    least 3% below the best so far, so noise between near-equal candidates keeps the earlier
//    one. Tunings in a process take turns (one mutex): timings that overlap measure each other.
// The records hold every candidate's median, for `zc cache ls` and compiler::autotune_choices().
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codegen/executable.h"
#include "runtime/driver/compile_context.h"

namespace zc::cache {
class Cache;
class Key;
struct Provenance;
}  // namespace zc::cache

namespace zc::runtime {

// What a choice is valid for: the CPU, the GEMM libraries (cpu::gemm_library_versions:
// versions, and which one f32 goes to by default), and the size of the thread pool the shares
// are of.
struct TuningHost {
  std::string cpu;
  std::string libraries;
  int threads = 1;
};
TuningHost this_host();
// What this host's records are made for (cache::Provenance: the CPU as target, the libraries
// as toolchain), which a bundle's records must match to be imported.
cache::Provenance tuning_provenance(const TuningHost& host);

struct TunedProduct {
  cpu::GemmProblem problem;
  cpu::GemmChoice choice;
  int team = 1;  // the team the timings ran with
  // Each candidate's median in microseconds, in the order they were tried.
  std::vector<std::pair<cpu::GemmChoice, double>> medians_us;
  bool timed = false;  // false: read from the cache
};

// The autotune-level key of `p`'s record on `host`.
cache::Key tuning_record_key(const cpu::GemmProblem& p, const TuningHost& host);

// The choice for each problem, from the context's cache (it may have none) or timed now and
// put there.
std::vector<TunedProduct> tune_products(std::span<const cpu::GemmProblem> problems,
                                        CompileContext& ctx, const TuningHost& host);

// `exec` with its library products tuned through the context's cache (a new executable sharing
// its code), or `exec` itself when it has none to tune.
std::shared_ptr<const codegen::Executable> autotuned(
    std::shared_ptr<const codegen::Executable> exec, CompileContext& ctx);

// The choices this process made or read so far, ordered by problem.
std::vector<TunedProduct> chosen_products();

// A record's bytes, and back (decoding raises zc::Error for bytes that are not one).
std::vector<uint8_t> encode_tuned(const TunedProduct& t);
TunedProduct decode_tuned(std::span<const uint8_t> bytes);
// "f32 NN 512x768x256 ... -> oneDNN, 8 of 16 threads (412.0 us; default 455.1 us)".
std::string describe_tuned(const TunedProduct& t);

}  // namespace zc::runtime
