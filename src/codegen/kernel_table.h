// ZC_LOGS=kernels' table: time per kernel label summed over a process, printed longest total
// first with launches, the first launch's time and the mean of the others (a label's first
// launch can be a library's one-time work: oneDNN's sgemm generates its kernel then, 47 ms
// against 0.3 us a call, and a mean over all launches hid what a call costs), and share, then
// the totals by kind (a label's first word). The CUDA
// backend fills one from CUDA events (backends/cuda/kernel_profile.h), the C++ backend from
// the wall clock around each step (backends/cpp/kernel_profile.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "codegen/schedule.h"

namespace zc::codegen {

// " sub mul rsqrt": kernel K's member ops, each once, in graph order (at most 8), which tells a
// layer_norm from a softmax in a label.
std::string member_ops(const Schedule& s, const Kernel& K);

class KernelTable {
 public:
  void add(const std::string& label, double ms) {
    Entry& e = rows_[label];
    if (e.launches == 0) e.first_ms = ms;
    e.ms += ms;
    e.launches += 1;
  }
  bool empty() const { return rows_.empty(); }
  // The table under `title` ("kernel times over the process (...):").
  std::string str(std::string_view title) const;
  // Writes str(title) to ZC_LOGS=kernels' log, when anything was added.
  void log(std::string_view title) const;

 private:
  struct Entry {
    double ms = 0;
    double first_ms = 0;  // the first launch's
    int64_t launches = 0;
  };
  std::map<std::string, Entry> rows_;
};

}  // namespace zc::codegen
