// The recorded graph of eager autograd.
//
// An op called with grad mode on and an input that requires a gradient gets a Node: what
// backward needs to compute its inputs' gradients from its outputs' (the op's derivative rule,
// and the values it reads), and one Edge per input saying where that input's gradient goes:
// into the node that produced the input, into a leaf's grad(), or nowhere. Each output's
// AutogradMeta points back at the node. Values are saved as aliases without autograd state,
// so a node never owns a tensor that owns the node (no reference cycles), and backward frees
// them once it has used them unless asked to keep them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "zc/tensor.h"

namespace zc {

namespace autograd {
class Node;
}

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;                              // leaves only
  std::shared_ptr<autograd::Node> grad_fn;  // null for a leaf
  uint32_t output_nr = 0;                   // which output of grad_fn this tensor is
};

namespace autograd {

struct Edge {
  std::shared_ptr<Node> fn;          // the producer of the input, or null
  uint32_t output_nr = 0;            // which of fn's outputs
  std::shared_ptr<TensorImpl> leaf;  // a leaf that requires a gradient, or null
  bool defined() const { return fn || leaf; }
};

class Node {
 public:
  virtual ~Node() = default;
  // What the node differentiates, for errors and grad_fn_name(): an op name, "to(cuda:0)", ...
  virtual std::string name() const = 0;
  // The gradients of the inputs (undefined: none) from those of the outputs (undefined: zero).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& output_grads) = 0;
  // Frees the saved values; apply() afterwards raises zc::Error.
  virtual void release() = 0;

  std::vector<Edge> next;                     // one per input
  std::vector<ops::TensorMeta> input_metas;   // each input's shape, dtype and device
  std::vector<ops::TensorMeta> output_metas;  // each output's
  uint64_t sequence = 0;                      // creation order: later nodes run first
};

// A plain alias of t's values: same storage and layout, no autograd state.
Tensor alias_without_grad(const Tensor& t);

// Values a node keeps for its backward: aliases (see above) with the version of each one's
// storage when saved, so that a value overwritten in place since (an optimizer step) is
// refused instead of giving a wrong gradient.
class SavedValues {
 public:
  void save(std::span<const Tensor> values);
  // Saves values[i] as it is where as_is[i] (no copy of its TensorImpl), else as save() does.
  // For values no node will ever make its output while they are saved, so that keeping their
  // autograd state makes no cycle: a node's inputs, and fresh values that are not its outputs
  // (a compiled forward's saved values), which save() copied one TensorImpl each.
  void save(std::span<const Tensor> values, const std::vector<bool>& as_is);
  // Raises zc::Error naming `owner` when a value changed or release() freed them.
  void check(const std::string& owner) const;
  const std::vector<Tensor>& values() const { return values_; }
  void release();

 private:
  std::vector<Tensor> values_;
  std::vector<uint64_t> versions_;
  bool released_ = false;
};

// t's autograd state, created on first use.
AutogradMeta& meta_of(const Tensor& t);
inline bool requires_grad(const Tensor& t) {
  const TensorImpl* impl = t.unsafe_impl();
  return impl && impl->autograd && impl->autograd->requires_grad;
}

// The edge to where t's gradient goes.
Edge edge_to(const Tensor& t);

// Makes `node` the producer of `outputs` (which then require gradients) after filling its
// edges and metadata from `inputs`. Outputs that are not floating point get no gradient, nor
// those `with_grad` (one flag per output, when given) leaves out. An output that already has
// autograd state (an input a kernel returned as it was) is replaced by an alias first, so that
// the input keeps its own state.
void attach(std::shared_ptr<Node> node, std::span<const Tensor> inputs,
            std::vector<Tensor>& outputs, const std::vector<bool>* with_grad = nullptr);

}  // namespace autograd
}  // namespace zc
