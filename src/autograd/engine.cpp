#include "autograd/engine.h"

#include <atomic>
#include <queue>
#include <unordered_map>

#include "autograd/node.h"
#include "ops/derivative.h"
#include "util/check.h"
#include "zc/autograd.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::autograd {

namespace {

void accumulate(Tensor& into, Tensor g) {
  into = into.defined() ? into + g : std::move(g);
}

void accumulate_leaf(TensorImpl& leaf, Tensor g) {
  AutogradMeta& m = *leaf.autograd;
  // A gradient never aliases another tensor's values: optimizers read it while the values
  // it came from may be reused.
  if (!m.grad.defined() && g.unsafe_impl()->storage && g.unsafe_impl()->storage.use_count() > 1) {
    g = g.clone();
  }
  accumulate(m.grad, std::move(g));
}

Tensor root_gradient(const Tensor& root, const Tensor& gradient) {
  if (gradient.defined()) {
    if (gradient.shape() != root.shape()) {
      throw Error("backward: the gradient has shape " + shape_str(gradient.shape()) +
                  " but the tensor has shape " + shape_str(root.shape()) + "; they must be equal");
    }
    if (gradient.device() != root.device()) {
      throw Error("backward: the gradient is on " + gradient.device().str() +
                  " but the tensor is on " + root.device().str());
    }
    return gradient.dtype() == root.dtype() ? gradient : gradient.to(root.dtype());
  }
  if (root.numel() != 1) {
    throw Error(
        "backward: a gradient can be implied only for a tensor of one element (a "
        "loss); this one has shape " +
        shape_str(root.shape()) + ": pass backward(gradient) with that shape");
  }
  return full({}, 1.0, root.dtype()).to(root.device()).expand(root.shape()).contiguous();
}

struct ByLaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence < b->sequence; }
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  if (!root.defined()) throw Error("backward: called on an undefined Tensor");
  if (root.is_traced()) {
    throw Error(
        "backward: called on a traced tensor inside a capture; call it on the compiled "
        "module's output instead");
  }
  if (!requires_grad(root)) {
    throw Error(
        "backward: the tensor does not require a gradient and no recorded op "
        "produced it (were its inputs' requires_grad_() set, and grad mode on?)");
  }
  NoGradGuard no_grad;
  Tensor g0 = root_gradient(root, gradient);
  const AutogradMeta& rm = *root.unsafe_impl()->autograd;
  if (!rm.grad_fn) {
    accumulate_leaf(*root.unsafe_impl(), g0);
    return;
  }

  // How many edges lead into each node reachable from the root: it runs when all have.
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack{rm.grad_fn.get()};
  pending[rm.grad_fn.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.fn) continue;
      auto [it, fresh] = pending.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (fresh) stack.push_back(e.fn.get());
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  buffers[rm.grad_fn.get()].resize(rm.grad_fn->output_metas.size());
  buffers[rm.grad_fn.get()][rm.output_nr] = g0;
  // Keeps every node alive until the pass ends, whatever the tensors do meanwhile.
  std::vector<std::shared_ptr<Node>> owners{rm.grad_fn};
  std::priority_queue<Node*, std::vector<Node*>, ByLaterFirst> ready;
  ready.push(rm.grad_fn.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    std::vector<Tensor> input_grads;
    if (any) {
      input_grads = n->apply(grads);
      ZC_CHECK(input_grads.size() == n->next.size(),
               "the derivative of " << n->name() << " gave " << input_grads.size()
                                    << " gradients for " << n->next.size() << " inputs");
      if (!retain_graph) n->release();
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.defined()) continue;
      Tensor g = any && input_grads[i].defined()
                     ? ops::input_gradient(n->name(), i, input_grads[i], n->input_metas[i])
                     : Tensor();
      if (e.leaf) {
        if (g.defined()) accumulate_leaf(*e.leaf, std::move(g));
        continue;
      }
      std::vector<Tensor>& buf = buffers[e.fn.get()];
      if (buf.empty()) buf.resize(e.fn->output_metas.size());
      if (g.defined()) accumulate(buf[e.output_nr], std::move(g));
      if (--pending[e.fn.get()] == 0) {
        owners.push_back(e.fn);
        ready.push(e.fn.get());
      }
    }
  }
}

namespace {
std::atomic<uint64_t> g_requires_grad_epoch{0};
}  // namespace

uint64_t requires_grad_epoch() {
  return g_requires_grad_epoch.load(std::memory_order_acquire);
}

void bump_requires_grad_epoch() {
  g_requires_grad_epoch.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace zc::autograd
