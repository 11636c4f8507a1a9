#include "codegen/backends/cpp/kernel_profile.h"

#include <mutex>
#include <sstream>

#include "codegen/backends/cpp/library_matmul.h"
#include "codegen/kernel_table.h"
#include "cpu/gemm_choice.h"
#include "cpu/threads.h"
#include "ops/registry.h"
#include "util/log.h"

namespace zc::codegen::cpp {

namespace {

// The process's table, printed by its destructor at exit.
class Profile {
 public:
  void add(const std::vector<std::string>& labels, const std::vector<double>& ms) {
    std::lock_guard lock(mu_);
    for (size_t k = 0; k < labels.size(); ++k) table_.add(labels[k], ms[k]);
  }
  ~Profile() {
    std::lock_guard lock(mu_);
    table_.log(
        "kernel times over the process (CPU wall clock per step, thread team wake-up and join "
        "included):");
  }

 private:
  std::mutex mu_;
  KernelTable table_;
};

Profile& profile() {
  static Profile p;
  return p;
}

}  // namespace

bool timing_cpu_kernels() {
  return logging::enabled(logging::Topic::kernels);
}

std::string step_label(const Schedule& s, size_t k, uint8_t choice) {
  const Kernel& K = s.kernels[k];
  std::ostringstream os;
  if (K.kind == KernelKind::extern_op) {
    const ir::Node& n = s.graph.nodes[K.anchor];
    os << "extern " << ops::op_def(n.op).name << " " << shape_str(s.graph.meta(n.outputs[0]).shape);
    return os.str();
  }
  os << kernel_kind_name(K.kind) << " " << shape_str(K.space);
  if (auto call = library_call(s, K)) {
    os << " (" << call->problem.str() << " on "
       << cpu::GemmChoice::from_code(choice).str(cpu::cpu_threads()) << ")";
  }
  os << member_ops(s, K);
  return os.str();
}

StepTimer::StepTimer(size_t steps) {
  if (!timing_cpu_kernels()) return;
  active_ = true;
  ms_.assign(steps, 0.0);
}

void StepTimer::finish(const std::vector<std::string>& labels) {
  if (active_ && labels.size() == ms_.size()) profile().add(labels, ms_);
}

}  // namespace zc::codegen::cpp
