#include "codegen/backends/cuda/kernel_profile.h"

#include <deque>
#include <mutex>
#include <sstream>

#include "codegen/kernel_table.h"
#include "cuda/stream.h"
#include "util/check.h"
#include "util/log.h"

namespace zc::codegen::cuda {

namespace {

using zc::cuda::check;
using zc::cuda::driver;

// A launch's events, read once the GPU has passed them.
struct Pending {
  std::string label;
  CUevent start, end;
};

// The process's table, printed by its destructor at exit (after reading what is still pending).
class Profile {
 public:
  // Takes the events of one call's launches. Reads those the GPU has finished (without
  // waiting, so that timing does not starve the GPU between calls), waiting only for the
  // oldest when too many are outstanding.
  void add(std::vector<Pending> launches) {
    std::lock_guard lock(mu_);
    for (Pending& p : launches) pending_.push_back(std::move(p));
    drain(/*wait=*/false);
    while (pending_.size() > kMaxPending) read(pending_.front(), /*wait=*/true);
  }
  ~Profile() {
    std::lock_guard lock(mu_);
    // The driver stays usable while the process exits (cuda/driver.h); a failure to read the
    // last calls' events leaves them out.
    drain(/*wait=*/true);
    table_.log("kernel times over the process (CUDA events per launch; CUDA graphs were off):");
  }

 private:
  static constexpr size_t kMaxPending = 4096;

  // Reads p if the GPU has passed its end (waiting for it if `wait`) and releases its events;
  // false if it has not been reached yet.
  bool read(const Pending& p, bool wait) {
    const CUresult r = wait ? driver().cuEventSynchronize(p.end) : driver().cuEventQuery(p.end);
    if (r == CUDA_ERROR_NOT_READY) return false;
    float ms = 0;
    if (r == CUDA_SUCCESS && driver().cuEventElapsedTime(&ms, p.start, p.end) == CUDA_SUCCESS) {
      table_.add(p.label, ms);
    }
    driver().cuEventDestroy(p.start);
    driver().cuEventDestroy(p.end);
    pending_.pop_front();
    return true;
  }
  void drain(bool wait) {
    while (!pending_.empty() && read(pending_.front(), wait)) {
    }
  }

  std::mutex mu_;
  KernelTable table_;
  std::deque<Pending> pending_;  // in launch order
};

Profile& profile() {
  static Profile p;
  return p;
}

}  // namespace

bool timing_kernels() {
  return logging::enabled(logging::Topic::kernels);
}

FirstRunTimer::FirstRunTimer(int device, bool first) : device_(device) {
  if (!first || !logging::enabled(logging::Topic::timing)) return;
  zc::cuda::synchronize(device_);
  timer_.emplace();
}

void FirstRunTimer::done(std::string_view what) {
  if (!timer_) return;
  zc::cuda::synchronize(device_);
  ZC_LOG(timing) << "first run of a compiled graph on cuda:" << device_ << " " << what << ": "
                 << timer_->ms() << " ms";
}

namespace {

// Launch k's label as a launch of its own.
std::string one_label(const Schedule& s, const Launch& l, size_t k) {
  const Kernel& K = s.kernels[k];
  std::ostringstream os;
  if (l.library) {
    os << "matmul cuBLASLt " << zc::cuda::describe(l.library->problem);
    if (l.has_kernel) os << " +epilogue";
  } else if (l.conv) {
    const zc::cuda::ConvProblem& p = l.conv->problem;
    os << "conv cuDNN " << shape_str(K.space) << " " << p.w[0] << "x" << p.w[1] << "x" << p.w[2]
       << "x" << p.w[3] << " /" << p.stride_h << (p.residual ? " +residual" : "")
       << (p.relu ? " +relu" : "");
    return os.str();
  } else {
    os << kernel_kind_name(K.kind) << " " << shape_str(K.space);
  }
  os << member_ops(s, K);
  return os.str();
}

}  // namespace

std::string launch_label(const Schedule& s, const std::vector<Launch>& launches, size_t k) {
  const Launch& l = launches[k];
  if (!l.pack) return one_label(s, l, k);
  std::string label = "pack of " + std::to_string(l.pack->members.size()) + ":";
  for (int32_t m : l.pack->members) label += " [" + one_label(s, launches[m], m) + "]";
  return label;
}

KernelTimer::KernelTimer(CUstream stream, size_t launches) {
  if (!timing_kernels()) return;
  active_ = true;
  stream_ = stream;
  start_.assign(launches, nullptr);
  end_.assign(launches, nullptr);
}

KernelTimer::~KernelTimer() {
  // Events of a call that raised before finish(): nothing reads them.
  for (CUevent e : start_) {
    if (e) driver().cuEventDestroy(e);
  }
  for (CUevent e : end_) {
    if (e) driver().cuEventDestroy(e);
  }
}

void KernelTimer::before(size_t k) {
  if (!active_) return;
  check(driver().cuEventCreate(&start_[k], CU_EVENT_DEFAULT), "creating a timing event");
  check(driver().cuEventRecord(start_[k], stream_), "recording a timing event");
}

void KernelTimer::after(size_t k) {
  if (!active_) return;
  check(driver().cuEventCreate(&end_[k], CU_EVENT_DEFAULT), "creating a timing event");
  check(driver().cuEventRecord(end_[k], stream_), "recording a timing event");
}

void KernelTimer::finish(const std::vector<std::string>& labels) {
  if (!active_) return;
  ZC_CHECK(labels.size() == start_.size(), "kernel timer: one label per launch");
  std::vector<Pending> launches;
  for (size_t k = 0; k < start_.size(); ++k) {
    if (start_[k] && end_[k]) launches.push_back({labels[k], start_[k], end_[k]});
    start_[k] = end_[k] = nullptr;  // the profile owns them now
  }
  profile().add(std::move(launches));
}

}  // namespace zc::codegen::cuda
