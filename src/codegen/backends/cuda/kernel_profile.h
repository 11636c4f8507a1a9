// ZC_LOGS=kernels: where a compiled CUDA graph's time goes, kernel by kernel. Every launch of a
// compiled graph (cuBLASLt products and generated kernels alike, eager ops included, since
// they are compiled graphs too) is bracketed by two CUDA events. The events are read once the
// GPU has passed them, without making the call wait, and each launch's time is added to a
// process-wide table keyed by its label. The table is printed to stderr, longest total first,
// when the process exits.
//
// The backend stops recording CUDA graphs while the topic is on (a replay runs kernels the
// events cannot bracket), so launches are issued one by one: a kernel that the CPU is slow to
// issue shows the GPU's wait for it in its time. The figures are each kernel's own time, not
// the step's time.
//
// FirstRunTimer is ZC_LOGS=timing's part: a compiled graph's first run as a whole.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/backends/cuda/launch.h"
#include "cuda/driver.h"
#include "util/timer.h"

namespace zc::codegen::cuda {

bool timing_kernels();

// "matmul cuBLASLt f32 M=1024 N=2304 K=768 B^T" or "row_reduce [8,128,768] sub mul rsqrt":
// what a profile line calls launch k ("pack of 3: [...] [...] [...]" for a pack, packs.h).
std::string launch_label(const Schedule& s, const std::vector<Launch>& launches, size_t k);

// One compiled call's launches; inactive (every method a no-op) unless timing_kernels().
class KernelTimer {
 public:
  KernelTimer(CUstream stream, size_t launches);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  void before(size_t k);
  void after(size_t k);
  // Hands the launches' events to the profile, to be added under `labels` (one per launch).
  void finish(const std::vector<std::string>& labels);

 private:
  bool active_ = false;
  CUstream stream_ = nullptr;
  std::vector<CUevent> start_, end_;
};

// ZC_LOGS=timing: what a compiled graph's first run costs (modules loaded lazily, cuBLASLt
// plans, first launches), waited for on both sides of the run, which only this log does.
// Inactive (no wait, no line) unless `first` and the topic is on.
class FirstRunTimer {
 public:
  FirstRunTimer(int device, bool first);
  explicit operator bool() const {
    return timer_.has_value();
  }  // active  // Waits for the run and logs "first run of a compiled graph on cuda:N <what>: ms".
  void done(std::string_view what);

 private:
  int device_;
  std::optional<Timer> timer_;
};

}  // namespace zc::codegen::cuda
