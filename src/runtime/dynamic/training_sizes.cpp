#include "runtime/dynamic/training_sizes.h"

#include <utility>

#include "runtime/driver/training_graphs.h"
#include "util/log.h"

namespace zc::runtime {

bool compile_training_for_all_sizes(nn::Module& module, std::span<const Tensor> inputs,
                                    const std::vector<DynamicRange>& dims,
                                    const ir::Graph& captured, std::span<const size_t> wrt,
                                    const codegen::Backend& backend, bool hierarchical,
                                    double budget, CompileContext& ctx) {
  std::optional<SizeSamples> samples =
      trace_size_samples(module, inputs, dims, captured, backend, /*leave_out_refused=*/true);
  if (!samples) return false;
  // The same samples' metadata for both lists of graphs.
  SizeSamples forward, backward;
  for (SizeSamples* s : {&forward, &backward}) {
    s->dims = samples->dims;
    s->who = samples->who;
    s->trace_ms = samples->trace_ms;
  }
  forward.described = samples->described + " (training forward)";
  backward.described = samples->described + " (training backward)";
  for (const ir::Graph& g : samples->graphs) {
    TrainingGraphs t = training_graphs(g, wrt, budget, ctx);
    if (!t.partition) {
      // No input gets a gradient: the call runs the inference graph.
      forward.graphs.push_back(g);
      continue;
    }
    backward.graphs.push_back(take_backward(t, g, wrt, budget, ctx));
    forward.graphs.push_back(std::move(t.partition->forward));
  }
  if (!backward.graphs.empty() && backward.graphs.size() != forward.graphs.size()) {
    ZC_LOG(recompiles) << samples->who << ": its gradients change with its sizes; it compiles "
                       << "per size";
    return false;
  }
  const bool all_forward =
      make_templates_of_samples(std::move(forward), backend, hierarchical, ctx).all;
  if (backward.graphs.empty()) return all_forward;
  const bool all_backward =
      make_templates_of_samples(std::move(backward), backend, hierarchical, ctx).all;
  return all_forward && all_backward;
}

}  // namespace zc::runtime
