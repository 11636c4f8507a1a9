// Gradients through a compiled graph. A compiled call whose output needs gradients records one
// autograd node; when backward() reaches it, the node runs the backward graph of the call's
// specialization: the joint graph's gradient half (lower/autodiff.h), which recomputes the
// forward values it needs from the saved inputs instead of keeping them (the forward graph
// stays exactly the inference graph, so it compiles and caches once for both uses). The
// backward graph is derived and compiled when a backward() first needs it, once per set of
// inputs that want gradients, through compile_graph and therefore through every cache level.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "codegen/executable.h"
#include "ir/graph.h"

namespace zc::runtime {

class BackwardPlans {
 public:
  // `hierarchical`: compile the backward graph as the forward was with Regions::Auto, each
  // distinct block (and its mirror, the block's backward) once.
  BackwardPlans(ir::Graph forward, const codegen::Backend& backend, bool hierarchical);

  struct Plan {
    std::shared_ptr<const codegen::Executable> exec;  // null when no input gets a gradient
    std::vector<bool> has_grad;                       // per graph input
  };
  // The plan for gradients of the inputs marked in `wanted` (one flag per graph input); built
  // on first use, then shared. Thread-safe.
  std::shared_ptr<const Plan> get(const std::vector<bool>& wanted);

  const ir::Graph& forward() const { return forward_; }

 private:
  ir::Graph forward_;
  const codegen::Backend& backend_;
  bool hierarchical_;
  std::mutex mu_;
  std::map<std::vector<bool>, std::shared_ptr<const Plan>> plans_;
};

// When autograd wants gradients of `inputs` (the call's graph inputs, in order), records on
// `out` the node that runs `plans`' backward; otherwise returns `out` as it is.
Tensor record_compiled_backward(Tensor out, std::vector<Tensor> inputs,
                                std::shared_ptr<BackwardPlans> plans, std::string module_type);

}  // namespace zc::runtime
