#include "runtime/compiled_backward.h"

#include "autograd/node.h"
#include "autograd/record.h"
#include "lower/autodiff.h"
#include "runtime/compile_graph.h"
#include "runtime/hierarchical.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::runtime {

BackwardPlans::BackwardPlans(ir::Graph forward, const codegen::Backend& backend, bool hierarchical)
    : forward_(std::move(forward)), backend_(backend), hierarchical_(hierarchical) {}

std::shared_ptr<const BackwardPlans::Plan> BackwardPlans::get(const std::vector<bool>& wanted) {
  std::lock_guard lock(mu_);
  auto it = plans_.find(wanted);
  if (it != plans_.end()) return it->second;
  Timer timer;
  std::vector<size_t> wrt;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i]) wrt.push_back(i);
  }
  lower::JointGraph joint = lower::joint_graph(forward_, wrt);
  auto plan = std::make_shared<Plan>();
  plan->has_grad.assign(wanted.size(), false);
  size_t with_grad = 0;
  for (size_t k = 0; k < wrt.size(); ++k) {
    plan->has_grad[wrt[k]] = joint.has_grad[k];
    with_grad += joint.has_grad[k] ? 1 : 0;
  }
  if (with_grad > 0) {
    // The backward graph: the joint graph without its forward outputs. Lowering's dead-code
    // pass keeps of the forward only what the gradients read.
    ir::Graph& g = joint.graph;
    g.outputs.erase(g.outputs.begin(), g.outputs.begin() + forward_.outputs.size());
    plan->exec = hierarchical_ ? compile_hierarchical(g, backend_) : compile_graph(g, backend_);
  }
  ZC_LOG(timing) << "backward graph: " << timer.ms() << " ms, " << with_grad << " gradients";
  plans_.emplace(wanted, plan);
  return plan;
}

namespace {

class CompiledBackwardNode final : public autograd::Node {
 public:
  CompiledBackwardNode(std::shared_ptr<BackwardPlans> plans, std::string module_type,
                       std::vector<bool> wanted)
      : plans_(std::move(plans)),
        module_type_(std::move(module_type)),
        wanted_(std::move(wanted)) {}

  void save(std::span<const Tensor> inputs) { inputs_.save(inputs); }

  std::string name() const override { return "compiled " + module_type_; }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    inputs_.check("compiled module " + module_type_);
    std::shared_ptr<const BackwardPlans::Plan> plan = plans_->get(wanted_);
    std::vector<Tensor> out(next.size());
    if (!plan->exec) return out;
    ZC_CHECK(grads.size() == 1, "a compiled graph with " << grads.size() << " outputs");
    Tensor g = grads[0].contiguous();
    std::vector<const Tensor*> args;
    for (const Tensor& t : inputs_.values()) args.push_back(&t);
    args.push_back(&g);
    std::vector<Tensor> results = plan->exec->run(args);
    size_t k = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (plan->has_grad[i]) out[i] = results[k++];
    }
    return out;
  }

  void release() override { inputs_.release(); }

 private:
  std::shared_ptr<BackwardPlans> plans_;
  std::string module_type_;
  std::vector<bool> wanted_;
  autograd::SavedValues inputs_;
};

}  // namespace

Tensor record_compiled_backward(Tensor out, std::vector<Tensor> inputs,
                                std::shared_ptr<BackwardPlans> plans, std::string module_type) {
  if (!autograd::wants_grad(inputs)) return out;
  std::vector<bool> wanted;
  for (const Tensor& t : inputs) wanted.push_back(autograd::requires_grad(t));
  auto node = std::make_shared<CompiledBackwardNode>(std::move(plans), std::move(module_type),
                                                     std::move(wanted));
  node->save(inputs);
  std::vector<Tensor> outs{std::move(out)};
  autograd::attach(std::move(node), inputs, outs);
  return outs[0];
}

}  // namespace zc::runtime
