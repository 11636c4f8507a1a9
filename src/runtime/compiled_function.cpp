#include "runtime/compiled_function.h"

#include "capture/capture.h"
#include "runtime/compile_graph.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::runtime {

std::shared_ptr<const CompiledFunction::Variant> CompiledFunction::compile(
    std::span<const Tensor> inputs) const {
  Timer timer;
  // Distinct handles for the trace: marking the caller's tensors would make them traced while
  // the trace lasts.
  std::vector<Tensor> stand_ins;
  for (const Tensor& t : inputs) stand_ins.push_back(t.detach());
  capture::Captured cap = capture::capture_function(stand_ins, [&] { return fn_(stand_ins); });
  auto v = std::make_shared<Variant>();
  for (const capture::InputBinding& b : cap.bindings) {
    size_t i = 0;
    while (i < stand_ins.size() && stand_ins[i].unsafe_impl() != b.tensor.unsafe_impl()) ++i;
    ZC_CHECK(i < stand_ins.size(), "a compiled function read a tensor it was not given");
    v->order.push_back(i);
  }
  Device device = Device::cpu();
  for (const Tensor& t : inputs) {
    if (!t.device().is_cpu()) device = t.device();
  }
  v->exec = compile_graph(cap.graph, resolve_backend("auto", device));
  for (const Tensor& t : inputs) v->metas.push_back(ops::meta_of(t));
  ZC_LOG(timing) << "compiled function: " << timer.ms() << " ms, " << cap.graph.nodes.size()
                 << " nodes";
  return v;
}

std::vector<Tensor> CompiledFunction::operator()(std::span<const Tensor> inputs) {
  std::shared_ptr<const Variant> found;
  {
    std::lock_guard lock(mu_);
    for (const auto& v : variants_) {
      bool same = v->metas.size() == inputs.size();
      for (size_t i = 0; same && i < inputs.size(); ++i)
        same = v->metas[i] == ops::meta_of(inputs[i]);
      if (same) {
        found = v;
        break;
      }
    }
    if (!found) {
      found = compile(inputs);
      variants_.push_back(found);
    }
  }
  std::vector<const Tensor*> args;
  args.reserve(found->order.size());
  for (size_t i : found->order) args.push_back(&inputs[i]);
  return found->exec->run(args);
}

}  // namespace zc::runtime
