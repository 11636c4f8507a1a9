#include "autograd/node.h"

#include <atomic>

#include "util/check.h"
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

namespace {
uint64_t version_of(const Tensor& t) {
  const Storage* s = t.defined() ? t.unsafe_impl()->storage.get() : nullptr;
  return s ? s->version() : 0;
}
}  // namespace

void SavedValues::save(std::span<const Tensor> values) {
  for (const Tensor& t : values) {
    values_.push_back(alias_without_grad(t));
    versions_.push_back(version_of(t));
  }
}

void SavedValues::save(std::span<const Tensor> values, const std::vector<bool>& as_is) {
  ZC_CHECK(as_is.size() == values.size(),
           "" << as_is.size() << " flags for " << values.size() << " saved values");
  values_.reserve(values_.size() + values.size());
  versions_.reserve(versions_.size() + values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    values_.push_back(as_is[i] ? values[i] : alias_without_grad(values[i]));
    versions_.push_back(version_of(values[i]));
  }
}

void SavedValues::check(const std::string& owner) const {
  if (released_) {
    throw Error("backward: tried to go through " + owner +
                " a second time, but its saved values were freed after the first backward(); "
                "pass retain_graph=true to the first backward() to keep them");
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    if (version_of(values_[i]) != versions_[i]) {
      throw Error("backward: a value that " + owner +
                  " saved for its gradient was overwritten after the forward pass (an "
                  "optimizer step before backward()?); run backward() before updating the "
                  "parameters");
    }
  }
}

void SavedValues::release() {
  values_.clear();
  versions_.clear();
  released_ = true;
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
            std::vector<Tensor>& outputs, const std::vector<bool>* with_grad) {
  ZC_CHECK(
      !with_grad || with_grad->size() == outputs.size(),
      "" << (with_grad ? with_grad->size() : 0) << " flags for " << outputs.size() << " outputs");
  for (Tensor& t : outputs) {
    if (t.defined() && t.unsafe_impl()->autograd) t = alias_without_grad(t);
  }
  node->sequence = g_sequence.fetch_add(1, std::memory_order_relaxed);
  node->next.reserve(inputs.size());
  node->input_metas.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next.push_back(edge_to(t));
    node->input_metas.push_back(ops::meta_of(t));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->output_metas.push_back(ops::meta_of(outputs[i]));
    if (!is_floating(outputs[i].dtype()) || (with_grad && !(*with_grad)[i])) continue;
    AutogradMeta& m = meta_of(outputs[i]);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(i);
  }
}

}  // namespace autograd
}  // namespace zc
