// Recording: what ops::call does after an eager op when gradients are wanted.
#pragma once

#include <span>
#include <string>

#include "ops/registry.h"
#include "zc/tensor.h"

namespace zc::autograd {

// Grad mode is on on this thread and some input requires a gradient.
bool wants_grad(std::span<const Tensor> inputs);

// Records `op` called on `inputs` with `attrs` producing `outputs`; backward then runs the
// op's derivative rule on the saved inputs and outputs. An op without a rule is recorded too,
// and raises zc::Error naming it only if a gradient is asked through it. Outputs may be
// replaced by aliases (see attach).
void record_op(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
               std::vector<Tensor>& outputs);

// Records a computation that cannot be differentiated (yet): backward through it raises
// zc::Error with `why`. Outputs may be replaced as in record_op.
void record_opaque(std::string what, std::string why, std::span<const Tensor> inputs,
                   std::vector<Tensor>& outputs);

}  // namespace zc::autograd
