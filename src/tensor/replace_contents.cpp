#include "autograd/node.h"
#include "tensor/assign.h"

namespace zc {

void replace_contents(const Tensor& target, const Tensor& value) {
  TensorImpl& t = *target.unsafe_impl();
  std::shared_ptr<AutogradMeta> autograd = t.autograd;
  TensorImpl replacement = *value.unsafe_impl();
  replacement.trace.reset();
  replacement.autograd = std::move(autograd);
  if (replacement.autograd && replacement.autograd->grad.defined()) {
    const Tensor& g = replacement.autograd->grad;
    if (g.shape() != replacement.shape || g.dtype() != replacement.dtype ||
        g.device() != replacement.device) {
      replacement.autograd->grad = Tensor();
    }
  }
  t = std::move(replacement);
}

}  // namespace zc
