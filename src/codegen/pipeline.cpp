#include "codegen/pipeline.h"

#include <sstream>

#include "codegen/verify_schedule.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::codegen {

namespace {
std::string describe(const Schedule& s) {
  std::ostringstream os;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    const Kernel& K = s.kernels[k];
    os << "kernel " << k << " " << kernel_kind_name(K.kind) << " " << shape_str(K.space) << ": ";
    for (int32_t n : K.nodes) os << ops::op_def(s.graph.nodes[n].op).name << " ";
    os << "\n";
  }
  return os.str();
}
}  // namespace

CodegenResult codegen(const ir::Graph& lowered, const Backend& backend, bool emit_source,
                      std::vector<uint64_t> varying) {
  CodegenResult r;
  // The passes, in order:
  Timer t;
  r.schedule = schedule(lowered, backend.policy(), std::move(varying));  // group nodes (fusion)
  verify_schedule(r.schedule);  // the scheduler's promises hold
  ZC_LOG(timing) << "codegen pass schedule: " << t.ms() << " ms";
  ZC_LOG(graph) << "schedule (" << r.schedule.kernels.size() << " kernels):\n"
                << describe(r.schedule);
  t = Timer();
  // Place intermediates in one arena by liveness.
  r.plan = plan_buffers(r.schedule, backend.policy().runs_together(r.schedule));
  ZC_LOG(timing) << "codegen pass plan_buffers: " << t.ms() << " ms, arena " << r.plan.arena_bytes
                 << " bytes";
  if (!emit_source) return r;
  t = Timer();
  r.source = backend.emit(r.schedule, r.plan);  // the backend's source for every kernel
  ZC_LOG(timing) << "codegen pass emit (" << backend.name() << "): " << t.ms() << " ms, "
                 << r.source.text.size() << " bytes of source";
  ZC_LOG(output_code) << r.source.text;
  return r;
}

}  // namespace zc::codegen
