// A compile's context and its report: a context in, a report out.
//
// Everything a compile reads besides its graph and backend comes in through its context: the
// cache it looks up and stores in, who asked (for log lines), and where what it does is
// counted. What it did comes back as a CompileReport: compiler runs, kernels generated, hits
// and misses per cache level and tier, size templates used or refused, time per stage. A
// report is exact for its compile whatever else the process compiles at the same time: the
// stages count into the context they were given (and, through it, into the process-wide
// counters of zc::compiler::stats()); nothing reads those counters back to learn what one
// compile did.
//
// One compile may run parts on threads of their own (a hierarchical graph's distinct parts)
// that share its context, which is thread-safe. A part that may outlive the caller (a
// training backward compiling while the forward runs) gets a context of its own, made as a
// part of the caller's: same cache, name and progress, a report its waiter merges.
//
// CompileProgress is what a caller waiting for a compile on another thread watches
// (CompileOptions::async_compile): whether it finished, and whether it began work only a cache
// miss makes (code generation for a graph the graph level lacked, a compiler run). A compile
// that waits for another one's result (two modules that need one graph) hears that one's cold
// work as its own.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/counters.h"
#include "util/stats.h"

namespace zc::cache {
class Cache;
}  // namespace zc::cache

namespace zc::runtime {

// What one compile did.
struct CompileReport {
  // Per stats::Counter, of the counters a compile counts (the others stay 0).
  std::array<int64_t, stats::kCounterCount> counts{};
  // Per stats::Stage, summed over the parts that ran side by side.
  std::array<double, stats::kStageCount> ms{};
  // Lookups and stores per cache level and tier.
  cache::CounterSnapshot cache;
  // It began work only a cache miss makes.
  bool cold = false;

  int64_t count(stats::Counter c) const { return counts[static_cast<size_t>(c)]; }
  double stage_ms(stats::Stage s) const { return ms[static_cast<size_t>(s)]; }
  int64_t compiler_runs() const { return count(stats::Counter::compiler_invocations); }
  // Hits of `level` over every tier.
  int64_t hits(cache::Level level) const;
  void merge(const CompileReport& other);
  // One line: "2 compiler runs, 3 kernels; graph: 1 miss; kernel: 1 hit (disk), 1 miss".
  std::string str() const;
};

class CompileProgress {
 public:
  void note_cold();
  void note_finished();
  bool cold() const;
  bool finished() const;
  // Returns once the compile finished or began cold work.
  void wait_until_finished_or_cold() const;
  // `waiter` (the progress of a compile waiting for this one's result) hears this compile's
  // cold work: now, if it began already, or when it begins.
  void forward_cold_to(const std::shared_ptr<CompileProgress>& waiter);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool cold_ = false, finished_ = false;
  std::vector<std::weak_ptr<CompileProgress>> waiters_;
};

class CompileContext {
 public:
  // Over the process cache (cache::process_cache()), opened at the first lookup: a compile
  // that looks nothing up (an interpreted graph) opens none.
  CompileContext();
  // Over `store`; null: no cache at all (every level computed, nothing stored).
  explicit CompileContext(cache::Cache* store);
  // A part of `parent` that may outlive the parent's caller: the same cache, name and
  // progress; its own counts, which the part's waiter merges into its context.
  struct PartOf {};
  CompileContext(PartOf, const CompileContext& parent);
  CompileContext(const CompileContext&) = delete;
  CompileContext& operator=(const CompileContext&) = delete;

  // The cache this compile uses; null: none.
  cache::Cache* store();
  // Where the cache counts this compile's lookups and stores (Cache::get's `also`).
  cache::CounterTable* lookups() { return &lookups_; }

  // Who asked, for log lines ("GPT#1"); empty when nobody in particular.
  const std::string& who() const { return who_; }
  void set_who(std::string who) { who_ = std::move(who); }

  // Counts into this compile's report and the process-wide counters.
  void count(stats::Counter c, int64_t n = 1);
  void add_time(stats::Stage s, double ms);
  // Before generating code for a graph the caches lack, or running the compiler.
  void note_cold_work();
  const std::shared_ptr<CompileProgress>& progress() const { return progress_; }
  // A report of a part compiled with its own context (already counted process-wide).
  void merge(const CompileReport& part);

  CompileReport report() const;

 private:
  bool process_store_ = false;
  std::atomic<cache::Cache*> store_{nullptr};
  std::string who_;
  std::shared_ptr<CompileProgress> progress_;
  std::array<std::atomic<int64_t>, stats::kCounterCount> counts_{};
  std::array<std::atomic<int64_t>, stats::kStageCount> ns_{};
  cache::CounterTable lookups_;
  mutable std::mutex mu_;  // guards merged_
  CompileReport merged_;
};

}  // namespace zc::runtime
