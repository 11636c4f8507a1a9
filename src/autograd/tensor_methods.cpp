// zc::Tensor's autograd methods (declared with the rest of Tensor in zc/tensor.h).
#include "autograd/engine.h"
#include "autograd/node.h"
#include "ops/dispatch.h"
#include "zc/autocast.h"

namespace zc {

Tensor& Tensor::requires_grad_(bool requires_grad) {
  const TensorImpl& t = impl();
  if (t.autograd && t.autograd->grad_fn) {
    throw Error("requires_grad_(): the tensor was produced by op '" + grad_fn_name() +
                "', so its gradient is already tracked; only leaves can be marked (use "
                "detach().requires_grad_() for a new leaf)");
  }
  if (requires_grad && !is_floating(t.dtype)) {
    throw Error(
        "requires_grad_(): only floating-point tensors can require gradients, this one "
        "is " +
        std::string(dtype_name(t.dtype)));
  }
  if (requires_grad && !autograd::requires_grad(*this)) autograd::bump_requires_grad_epoch();
  if (requires_grad || t.autograd) autograd::meta_of(*this).requires_grad = requires_grad;
  return *this;
}

bool Tensor::requires_grad() const {
  return autograd::requires_grad(*this);
}

bool Tensor::is_leaf() const {
  const TensorImpl& t = impl();
  return !t.autograd || !t.autograd->grad_fn;
}

const Tensor& Tensor::grad() const {
  static const Tensor none;
  const TensorImpl& t = impl();
  return t.autograd ? t.autograd->grad : none;
}

Tensor& Tensor::mutable_grad() const {
  impl();
  return autograd::meta_of(*this).grad;
}

std::string Tensor::grad_fn_name() const {
  const TensorImpl& t = impl();
  return t.autograd && t.autograd->grad_fn ? t.autograd->grad_fn->name() : "";
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  // Derivatives compute in the dtypes their forward ops had: no autocast policy of their own.
  AutocastGuard off;
  autograd::run_backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const {
  impl();
  // Traced, the graph records where gradients stop: an alias would be the same graph value,
  // and compiled training would send gradients through it.
  if (is_traced()) return ops::call1(ops::OpId::detach, {*this});
  return autograd::alias_without_grad(*this);
}

}  // namespace zc
