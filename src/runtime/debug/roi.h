// The return on a compiled module's compile time: what compiling cost it, what a call costs
// compiled and eagerly, and after how many calls the compile has paid for itself.
//
// Every compiled call is timed (two clock reads). Eager time is measured where a call runs
// eagerly anyway (while its code compiles in the background, CompileOptions::async_compile) and,
// with sampling on (CompileOptions::roi_sampling, roi_guard, or ZC_LOGS=roi), on a few calls
// that run eagerly instead of compiled: the module's 2nd, 10th, 100th, 1000th... guard hit, so
// sampling costs a handful of eager calls over a process's life, never a second run of a call.
// Times are host wall time of the call: on a GPU, what the host waited (launches, or the
// replay), not the kernels' time. Per-call figures are medians (of the last 64 compiled calls,
// of every eager one), over whatever input shapes those calls had; a call's cost is recorded
// without a lock, as calls from many threads would otherwise queue on it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zc/compile.h"

namespace zc::runtime {

class RoiRecord {
 public:
  explicit RoiRecord(std::string name) : name_(std::move(name)) {}
  // "GPT#2": the module's type and creation number.
  const std::string& name() const { return name_; }

  // Time spent capturing and compiling (or loading) for a call, in the foreground or not.
  void add_compile(double ms);
  void add_compiled_call(double ms);
  void add_eager_call(double ms, bool sample);
  // Whether the `n`th guard hit (1-based) of the module is one to run eagerly as a sample.
  static bool is_sample(int64_t n);
  // After a sample: whether the measured gain is negative (eager faster than compiled by more
  // than 5%, with at least 2 eager samples and 5 compiled calls to compare).
  bool gain_is_negative() const;
  // Marks the module as running eagerly from now on (CompileOptions::roi_guard).
  void give_up();

  compiler::ModuleRoi snapshot() const;

 private:
  const std::string name_;
  double compiled_median_ms() const;
  double eager_median_ms() const;  // under mu_

  std::atomic<int64_t> compiled_calls_{0};
  std::array<std::atomic<int64_t>, 64> recent_ns_{};  // the last compiled calls, a ring
  mutable std::mutex mu_;                             // guards what follows
  int64_t compiles_ = 0;
  double compile_ms_ = 0;
  std::vector<double> eager_ms_;  // every eager call's time (few: samples and async waits)
  int64_t eager_calls_ = 0, eager_samples_ = 0;
  bool gave_up_ = false;
};

// A record for a new compiled module, named after its type and numbered in creation order
// ("GPT#2"); kept for the report after the module is gone.
std::shared_ptr<RoiRecord> new_roi_record(const std::string& type_name);

// Whether ZC_LOGS=roi asked for eager samples of every compiled module.
bool roi_logging();

}  // namespace zc::runtime
