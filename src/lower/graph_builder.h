// The output side of a lowering pass. A pass walks its input graph's nodes in order and, for
// each, emits zero or more nodes (or maps the node's outputs onto values it already has);
// the builder renumbers values, puts every emitted node in the region of the input node it
// came from, and moves region ranges so that each region covers exactly the nodes emitted for
// the nodes it covered. Regions therefore stay contiguous and nested (one may become empty),
// and the graph's inputs stay as they were, in order, whatever the pass does.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"

namespace zc::lower {

class GraphBuilder {
 public:
  // Copies the inputs of `in` and, when `copy_constants`, its constants.
  explicit GraphBuilder(const ir::Graph& in, bool copy_constants = true);

  const ir::Graph& graph() const { return out_; }
  const ops::TensorMeta& meta(ir::ValueId now) const { return out_.meta(now); }

  // The output value standing for input value `old`.
  ir::ValueId map(ir::ValueId old) const;
  std::vector<ir::ValueId> map(std::span<const ir::ValueId> old) const;
  // Whether input value `old` has an output value yet.
  bool mapped(ir::ValueId old) const { return map_[old] >= 0; }
  // From now on, uses of input value `old` read output value `now`.
  void alias(ir::ValueId old, ir::ValueId now);

  // What is emitted next comes from input node `old_index`; calls go in increasing order.
  void begin_node(int32_t old_index);
  // Emits `old` itself, reading the mapped inputs.
  void copy_node(const ir::Node& old);
  // Emits a node in the current node's region; output metadata from the op's shape rule.
  std::vector<ir::ValueId> add_node(ops::OpId op, const ops::Attrs& attrs,
                                    std::vector<ir::ValueId> inputs);
  // A constant: `data` contiguous on the CPU, its wrapped_number flag kept in the metadata.
  ir::ValueId add_constant(Tensor data);
  // Emits input constant `old` and maps it.
  void copy_constant(const ir::Constant& old);

  // The value's data when it is a constant of the output, else nullptr.
  const Tensor* constant(ir::ValueId now) const;
  // The output node defining `now`, or nullptr for inputs and constants.
  const ir::Node* producer(ir::ValueId now) const;

  // The finished graph: outputs mapped, region ranges moved.
  ir::Graph finish() &&;

 private:
  ir::ValueId push_constant(ops::TensorMeta meta, Tensor data);

  const ir::Graph& in_;
  ir::Graph out_;
  std::vector<ir::ValueId> map_;  // input value -> output value, -1 while unmapped
  std::vector<int32_t> start_;    // input node index -> first output node emitted for it
  int32_t next_start_ = 0;        // first input node whose start_ is not yet known
  ir::RegionId region_ = ir::kNoRegion;
  std::vector<int32_t> constant_of_;  // output value -> index in out_.constants, or -1
};

}  // namespace zc::lower
