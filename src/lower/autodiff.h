// Autodiff of a graph: the joint forward+backward graph that compiled training partitions and
// compiles. The backward half is what the ops' derivative rules (OpDef::derivative) record when
// they run on traced tensors standing for the forward's values, so it computes what eager
// backward() computes, op for op.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"

namespace zc::lower {

struct JointGraph {
  ir::Graph graph;
  // For each entry of `wrt`, whether the graph outputs its gradient (no path from that input to
  // an output means no gradient, as eager autograd leaves grad() undefined).
  std::vector<bool> has_grad;
};

// Input: a captured graph that verifies (composite ops allowed), and `wrt`, indices into its
// inputs, each of a floating dtype. Output: a graph that verifies, with
//   inputs:  the captured graph's inputs (same order, kinds and metadata), then one `user`
//            input per captured output: the gradient flowing into it (same shape and dtype);
//   nodes:   the captured graph's nodes (same regions), then the backward nodes in the order
//            the rules recorded them (reverse order of the forward), each in the mirror of its
//            forward node's region: "grad(Layer)", nested as the forward regions are;
//   outputs: the captured graph's outputs, then the gradient of each `wrt` input that has one,
//            in `wrt` order, with that input's shape and dtype.
// Floating outputs only carry gradients; a gradient that must pass through an op without a
// derivative rule raises zc::Error naming the op.
JointGraph joint_graph(const ir::Graph& captured, std::span<const size_t> wrt);

// Per value of `captured`: whether it depends on a `wrt` input through floating values. Eager
// autograd gives exactly these a grad_fn (an op with an input that requires gradients records
// its floating outputs; an argmax, a comparison or a cast to an integer ends the chain), so a
// compiled call's output gets its backward node only where this holds for it.
std::vector<bool> tracked_values(const ir::Graph& captured, std::span<const size_t> wrt);

}  // namespace zc::lower
