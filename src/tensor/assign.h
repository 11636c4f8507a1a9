// Writing new values into an existing tensor's memory, for the few places that update state in
// place (optimizer steps): compiled graphs and CUDA-graph replays hold parameter addresses,
// so a parameter keeps its storage and gets new contents.
#pragma once

#include "zc/tensor.h"

namespace zc {

// Copies `src`'s values into `dst` (same shape, dtype and device; `dst` contiguous and not a
// traced tensor) and bumps the version of `dst`'s storage. Raises zc::Error otherwise.
void assign_values(const Tensor& dst, const Tensor& src);

// `target`'s handle now shows `value`'s storage, layout, dtype and device (module.to(),
// weight loading): every handle sharing target's TensorImpl sees the change. Target keeps its
// autograd state (a parameter still requires its gradient), but drops an accumulated gradient
// whose shape, dtype or device no longer matches.
void replace_contents(const Tensor& target, const Tensor& value);

}  // namespace zc
