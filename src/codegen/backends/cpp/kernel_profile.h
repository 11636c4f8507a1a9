// ZC_LOGS=kernels on the CPU: where a compiled graph's time goes, step by step. Each step of a
// compiled call (a generated kernel, with the library product it makes, or an extern op) is
// timed by the wall clock around it and added to a process-wide table (codegen/kernel_table.h)
// under its label, printed to stderr when the process exits. A step's time includes waking and
// joining its thread team. Off, it costs one branch per call.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "codegen/schedule.h"

namespace zc::codegen::cpp {

bool timing_cpu_kernels();

// "matmul [512,768] oneDNN on a kept packed B ... f32 NT 512x768x256 +add +gelu" or
// "row_reduce [4,128,256] sub mul rsqrt": what the profile calls kernel k of `s`, run with
// product choice `choice` (a GemmChoice code; its team is the pool's).
std::string step_label(const Schedule& s, size_t k, uint8_t choice);

// One compiled call's steps; inactive (every method a no-op) unless timing_cpu_kernels().
class StepTimer {
 public:
  explicit StepTimer(size_t steps);
  void before() {
    if (active_) start_ = std::chrono::steady_clock::now();
  }
  void after(size_t k) {
    if (active_)
      ms_[k] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
                    .count();
  }
  bool active() const { return active_; }  // ZC_LOGS=kernels was on when the call began
  // Adds the steps' times to the profile under `labels` (one per step).
  void finish(const std::vector<std::string>& labels);

 private:
  bool active_ = false;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> ms_;
};

}  // namespace zc::codegen::cpp
