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
    inputs_.save(inputs);
    outputs_.save(outputs);
  }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    if (!op_.derivative) {
      throw Error("backward: op '" + name() +
                  "' has no derivative rule, and a gradient was asked through it; compute it "
                  "under a NoGradGuard or from tensors that do not require gradients");
    }
    const std::string owner = "op '" + name() + "'";
    inputs_.check(owner);
    outputs_.check(owner);
    uint64_t wants = 0;
    for (size_t i = 0; i < next.size() && i < 64; ++i) {
      if (next[i].defined()) wants |= uint64_t{1} << i;
    }
    return op_.derivative(ops::VjpArgs{inputs_.values(), outputs_.values(), attrs_, grads, wants});
  }

  void release() override {
    inputs_.release();
    outputs_.release();
  }

 private:
  const ops::OpDef& op_;
  ops::Attrs attrs_;
  SavedValues inputs_, outputs_;
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
  auto node = std::make_shared<OpNode>(op, attrs);
  node->save(inputs, outputs);
  attach(std::move(node), inputs, outputs);
}

void record_opaque(std::string what, std::string why, std::span<const Tensor> inputs,
                   std::vector<Tensor>& outputs) {
  attach(std::make_shared<OpaqueNode>(std::move(what), std::move(why)), inputs, outputs);
}

}  // namespace zc::autograd
