#include "autograd/node.h"

#include <atomic>

#include "zc/autograd.h"

namespace zc {

namespace {
thread_local bool tl_grad_enabled = true;
}  // namespace

bool GradMode::is_enabled() {
  return tl_grad_enabled;
}
void GradMode::set_enabled(bool enabled) {
  tl_grad_enabled = enabled;
}

namespace autograd {

namespace {
std::atomic<uint64_t> g_sequence{0};
}  // namespace

Tensor alias_without_grad(const Tensor& t) {
  if (!t.defined()) return t;
  auto impl = std::make_shared<TensorImpl>(*t.unsafe_impl());
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

AutogradMeta& meta_of(const Tensor& t) {
  TensorImpl* impl = t.unsafe_impl();
  if (!impl->autograd) impl->autograd = std::make_shared<AutogradMeta>();
  return *impl->autograd;
}

Edge edge_to(const Tensor& t) {
  const TensorImpl* impl = t.unsafe_impl();
  if (!impl || !impl->autograd || !impl->autograd->requires_grad) return {};
  const AutogradMeta& m = *impl->autograd;
  if (m.grad_fn) return Edge{m.grad_fn, m.output_nr, nullptr};
  return Edge{nullptr, 0, t.impl_ptr()};
}

void attach(std::shared_ptr<Node> node, std::span<const Tensor> inputs,
            std::span<const Tensor> outputs) {
  node->sequence = g_sequence.fetch_add(1, std::memory_order_relaxed);
  node->next.reserve(inputs.size());
  node->input_metas.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next.push_back(edge_to(t));
    node->input_metas.push_back(ops::meta_of(t));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->output_metas.push_back(ops::meta_of(outputs[i]));
    if (!is_floating(outputs[i].dtype())) continue;
    AutogradMeta& m = meta_of(outputs[i]);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(i);
  }
}

}  // namespace autograd
}  // namespace zc
