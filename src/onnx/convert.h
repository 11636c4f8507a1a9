// ONNX operators as zc tensor code: one rule per operator type, holding the attributes it
// reads and the function that computes its outputs from its inputs. The model's forward runs
// the rules in node order, so the same code runs eagerly and is traced into a graph by
// compile(). Values that ONNX computes from shapes (Shape -> Gather -> Concat -> Reshape) are
// concrete tensors during a trace (a traced tensor's shape is known), so the rules that need a
// constant (a Reshape's shape, a Slice's bounds) read them; one that depends on the model's
// input values raises zc::Error naming the node.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "onnx/onnx_pb.h"
#include "zc/tensor.h"

namespace zc::onnx_file {
class ExternalData;
}

namespace zc::onnx_import {

// One node at the moment it runs: its inputs (undefined where an optional one is left out)
// and its attributes.
class NodeArgs {
 public:
  NodeArgs(const ::onnx::NodeProto& node, int64_t opset, std::vector<Tensor> inputs)
      : node(node), opset(opset), inputs_(std::move(inputs)) {}

  const ::onnx::NodeProto& node;
  const int64_t opset;

  size_t count() const { return inputs_.size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  // Raises zc::Error when input i is absent.
  const Tensor& in(size_t i) const;
  const std::vector<Tensor>& all() const { return inputs_; }
  // Outputs the node names (a trailing optional output may be left out).
  size_t outputs() const;

  const ::onnx::AttributeProto* attr(std::string_view name) const;
  int64_t i(std::string_view name, int64_t fallback) const;
  float f(std::string_view name, float fallback) const;
  std::string s(std::string_view name, const std::string& fallback) const;
  std::vector<int64_t> ints(std::string_view name, std::vector<int64_t> fallback = {}) const;

  // Input i's values as integers; it must be concrete (computed from constants and shapes).
  std::vector<int64_t> values(size_t i, const char* what) const;
  // Input i's values as numbers of any dtype (scales, a region); concrete as values().
  std::vector<double> numbers(size_t i, const char* what) const;
  // Input i as one number (a 0-dim or one-element concrete tensor).
  double scalar(size_t i, const char* what) const;
  // `axis` counted from the end when negative, checked against `rank` (an Error if outside).
  int64_t axis(int64_t axis, int64_t rank) const;
  // A zc::Error naming this node.
  Error error(const std::string& detail) const;

 private:
  // Input i, which must not be computed from the model's input values.
  const Tensor& concrete(size_t i, const char* what) const;

  std::vector<Tensor> inputs_;
};

using Convert = std::vector<Tensor> (*)(const NodeArgs&);

struct OpRule {
  std::string_view op;
  Convert fn;
  std::vector<std::string_view> attrs;  // every attribute it reads; others are unsupported
  // The inputs whose values it reads as numbers (a shape, axes, pads, bounds): they stay on the
  // CPU. Its other inputs, tensors it computes on, are moved to the device of the node's other
  // inputs (model.cpp), so that a constant of the file meets the activations where they are.
  std::vector<size_t> values = {};
};

// The rules of each family of operators (convert_<family>.cpp).
void add_math_rules(std::vector<OpRule>& rules);
void add_activation_rules(std::vector<OpRule>& rules);
void add_nn_rules(std::vector<OpRule>& rules);
void add_shape_rules(std::vector<OpRule>& rules);
void add_layout_rules(std::vector<OpRule>& rules);
void add_indexing_rules(std::vector<OpRule>& rules);
void add_recurrent_rules(std::vector<OpRule>& rules);
void add_resize_rules(std::vector<OpRule>& rules);
void add_einsum_rules(std::vector<OpRule>& rules);
void add_extra_rules(std::vector<OpRule>& rules);
void add_gridsample_rules(std::vector<OpRule>& rules);

const OpRule* find_rule(std::string_view op);
std::vector<std::string> rule_names();
// "" when the node's op has a rule and it sets no attribute the rule does not read.
std::string check_node(const ::onnx::NodeProto& node, int64_t opset);

// A 1-D i64 tensor of `v` on the CPU.
Tensor i64_values(const std::vector<int64_t>& v);

// A 0-d tensor of `v` on `device`: a rule's constant meets its operands on their device (a
// module moved to a GPU runs its file's constants there).
Tensor scalar_on(double v, DType dtype, Device device);

// A tensor of the file (an initializer, a Constant's value); `external` reads the tensors
// stored outside it (without one, such a tensor raises zc::Error).
Tensor tensor_of(const ::onnx::TensorProto& t, const std::string& what,
                 const onnx_file::ExternalData* external = nullptr);

}  // namespace zc::onnx_import
