// The process-wide compiler counters behind zc::compiler::stats(): any stage counts what it did
// (compiles, recordings, replays) without knowing who reads it; lock-free increments. What one
// compile did is its own report (runtime/driver/compile_context.h), which counts into these
// too: read them for the process, never as differences around a compile.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zc::stats {

enum class Counter : uint8_t {
  graphs_captured,
  recompiles,
  graph_breaks,
  code_cache_hits,
  code_cache_misses,
  guard_hits,
  compiler_invocations,
  kernels_generated,
  extern_ops,
  regions_found,      // outlined calls of repeated blocks
  region_graphs,      // distinct repeated blocks
  parts_compiled,     // distinct parts compiled (or loaded) for hierarchical graphs
  parts_reused,       // parts that reused one of those
  graph_recordings,   // CUDA graphs recorded
  graph_replays,      // calls that replayed one
  size_templates,     // code made once for many sizes of a graph
  template_hits,      // executables for a new size from such code (no compiler run)
  template_refusals,  // graphs whose stored template did not serve their sizes
  backwards_derived,  // joint graphs derived and partitioned (not read from the cache)
  autotune_timings,   // library products whose candidates max_autotune timed
  autotune_hits,      // library products whose choice came from the autotune cache level
  graphs_preloaded,   // graphs loaded through a load hint (runtime/records/load_hint.h)
  async_compiles,     // compiles started in the background (CompileOptions::async_compile)
  eager_calls,        // calls of compiled modules that ran their forward eagerly
  accuracy_checks,    // calls compared against eager (CompileOptions::accuracy_check)
  accuracy_failures,  // those that differed beyond the tolerances
  weights_kept,       // weights converted into a kernel's own layout and kept across calls
  training_calls,     // compiled calls with gradients wanted (a forward that saves values)
  saved_bytes,        // bytes those calls saved for their backward
  count
};
// compile covers everything after capture; lower, codegen, cxx and load are its parts. ready
// is wall time of whole guard misses (compile is summed over parts that may run in parallel).
enum class Stage : uint8_t { capture, compile, lower, codegen, cxx, load, ready, autotune, count };
inline constexpr size_t kCounterCount = static_cast<size_t>(Counter::count);
inline constexpr size_t kStageCount = static_cast<size_t>(Stage::count);

void add(Counter c, int64_t n = 1);
void add_time(Stage s, double ms);
int64_t read(Counter c);
double read_ms(Stage s);
void reset();

}  // namespace zc::stats
