// nn::Checkpoint (zc/nn.h): the eager form is a node whose backward runs the block again; the
// compiled form is the block's region, which the partitioner recomputes (lower/partition.h).
#include <algorithm>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "ops/dispatch.h"
#include "zc/autograd.h"
#include "zc/nn.h"
#include "zc/ops.h"

namespace zc::nn {

namespace {

class CheckpointNode final : public autograd::Node {
 public:
  CheckpointNode(std::shared_ptr<Module> module, std::span<const Tensor> inputs)
      : module_(std::move(module)) {
    values_.save(inputs);
  }

  std::string name() const override { return "checkpoint(" + module_->type_name() + ")"; }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    values_.check(name());
    const std::vector<Tensor>& saved = values_.values();
    // The forward again, with gradients, from the saved inputs as leaves of their own.
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < saved.size(); ++i) {
      Tensor x = autograd::alias_without_grad(saved[i]);
      if (next[i].defined()) x.requires_grad_(true);
      leaves.push_back(std::move(x));
    }
    Tensor root;
    {
      AutoGradMode on(true);  // the backward runs with it off
      const std::vector<Tensor> outs = (*module_)(leaves);
      if (outs.size() != grads.size()) {
        throw Error(name() + ": run again for the backward, the module returned " +
                    std::to_string(outs.size()) + " outputs where its forward returned " +
                    std::to_string(grads.size()) + " (it must compute the same thing twice)");
      }
      // One root whose gradient with respect to each output is that output's gradient.
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!grads[k].defined() || !autograd::requires_grad(outs[k])) continue;
        Tensor term = sum(outs[k] * autograd::alias_without_grad(grads[k]));
        root = root.defined() ? root + term : term;
      }
    }
    std::vector<Tensor> out(next.size());
    if (!root.defined()) return out;
    // The parameters' gradients accumulate into them here; the inputs' go back to the caller.
    autograd::run_backward(root, Tensor(), false);
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (next[i].defined()) out[i] = leaves[i].grad();
    }
    return out;
  }

  void release() override { values_.release(); }

 private:
  std::shared_ptr<Module> module_;
  autograd::SavedValues values_;
};

}  // namespace

Checkpoint::Checkpoint(std::shared_ptr<Module> module) : module_(std::move(module)) {
  if (!module_) throw Error("nn::checkpoint: the module is null");
  register_module("module", module_);
}

std::vector<Tensor> Checkpoint::forward(const std::vector<Tensor>& inputs) {
  // Traced (a compiled module's capture): the block as it is, in this module's region, which
  // the partitioner recomputes. Without gradients wanted there is nothing to keep.
  bool wanted = false;
  for (const Tensor& x : inputs) wanted = wanted || autograd::requires_grad(x);
  for (const Tensor& p : module_->parameters()) wanted = wanted || autograd::requires_grad(p);
  if (ops::current_interceptor() || !GradMode::is_enabled() || !wanted) {
    return (*module_)(inputs);
  }
  std::vector<Tensor> outs;
  {
    NoGradGuard off;
    outs = (*module_)(inputs);
  }
  auto node = std::make_shared<CheckpointNode>(module_, inputs);
  autograd::attach(node, inputs, outs);
  return outs;
}

std::shared_ptr<Checkpoint> checkpoint(std::shared_ptr<Module> module) {
  return std::make_shared<Checkpoint>(std::move(module));
}

}  // namespace zc::nn
