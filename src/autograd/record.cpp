#include "autograd/record.h"

#include "autograd/node.h"
#include "zc/autograd.h"

namespace zc::autograd {

namespace {

// An op of the registry: backward runs its derivative rule.
class OpNode final : public Node {
 public:
  OpNode(const ops::OpDef& op, const ops::Attrs& attrs) : op_(op), attrs_(attrs) {}

  std::string name() const override { return std::string(op_.name); }

  void save(std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
    for (const Tensor& t : inputs) inputs_.push_back(alias_without_grad(t));
    for (const Tensor& t : outputs) outputs_.push_back(alias_without_grad(t));
    for (const auto* list : {&inputs_, &outputs_}) {
      for (const Tensor& t : *list) versions_.push_back(version_of(t));
    }
  }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    if (!op_.derivative) {
      throw Error("backward: op '" + name() +
                  "' has no derivative rule, and a gradient was asked through it; compute it "
                  "under a NoGradGuard or from tensors that do not require gradients");
    }
    if (released_) {
      throw Error("backward: tried to go through op '" + name() +
                  "' a second time, but its saved values were freed after the first "
                  "backward(); pass retain_graph=true to the first backward() to keep them");
    }
    check_unchanged();
    uint64_t wants = 0;
    for (size_t i = 0; i < next.size() && i < 64; ++i) {
      if (next[i].defined()) wants |= uint64_t{1} << i;
    }
    return op_.derivative(ops::VjpArgs{inputs_, outputs_, attrs_, grads, wants});
  }

  void release() override {
    inputs_.clear();
    outputs_.clear();
    versions_.clear();
    released_ = true;
  }

 private:
  static uint64_t version_of(const Tensor& t) {
    const Storage* s = t.unsafe_impl()->storage.get();
    return s ? s->version() : 0;
  }

  void check_unchanged() const {
    size_t i = 0;
    for (const auto* list : {&inputs_, &outputs_}) {
      for (const Tensor& t : *list) {
        if (version_of(t) != versions_[i++]) {
          throw Error("backward: a value that op '" + name() +
                      "' saved for its gradient was overwritten after the forward pass (an "
                      "optimizer step before backward()?); run backward() before updating the "
                      "parameters");
        }
      }
    }
  }

  const ops::OpDef& op_;
  ops::Attrs attrs_;
  std::vector<Tensor> inputs_, outputs_;
  std::vector<uint64_t> versions_;  // of each saved value's storage, inputs then outputs
  bool released_ = false;
};

class OpaqueNode final : public Node {
 public:
  OpaqueNode(std::string what, std::string why) : what_(std::move(what)), why_(std::move(why)) {}
  std::string name() const override { return what_; }
  std::vector<Tensor> apply(const std::vector<Tensor>&) override {
    throw Error("backward: a gradient was asked through " + what_ + ", which " + why_);
  }
  void release() override {}

 private:
  std::string what_, why_;
};

// Outputs that already carry autograd state (inputs returned as they were) become aliases.
void own_outputs(std::vector<Tensor>& outputs) {
  for (Tensor& t : outputs) {
    if (t.defined() && t.unsafe_impl()->autograd) t = alias_without_grad(t);
  }
}

}  // namespace

bool wants_grad(std::span<const Tensor> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (requires_grad(t)) return true;
  }
  return false;
}

void record_op(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
               std::vector<Tensor>& outputs) {
  own_outputs(outputs);
  auto node = std::make_shared<OpNode>(op, attrs);
  node->save(inputs, outputs);
  attach(std::move(node), inputs, outputs);
}

void record_opaque(std::string what, std::string why, std::span<const Tensor> inputs,
                   std::vector<Tensor>& outputs) {
  own_outputs(outputs);
  attach(std::make_shared<OpaqueNode>(std::move(what), std::move(why)), inputs, outputs);
}

}  // namespace zc::autograd
