// The backward pass of eager autograd.
#pragma once

#include "zc/tensor.h"

namespace zc::autograd {

// Propagates `gradient` (ones for a one-element root when undefined) from `root` through the
// recorded graph in reverse creation order, each node once, after every gradient into it has
// been summed; leaves that require gradients accumulate theirs into grad(). Runs with grad
// mode off (no graph of the backward is recorded). Unless `retain_graph`, every node it ran
// frees its saved values. Raises zc::Error for a root that does not require a gradient, a
// missing gradient of a non-scalar root, a gradient of the wrong shape, and a node that cannot
// run (no derivative rule, values freed by an earlier backward).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

// A process-wide counter bumped whenever requires_grad_(true) makes a tensor start to want
// gradients. Compiled modules compare it on each call: a tensor their trace read as a constant
// that now wants gradients must become an input, so they trace again (runtime/compiled_module).
uint64_t requires_grad_epoch();
void bump_requires_grad_epoch();

}  // namespace zc::autograd
