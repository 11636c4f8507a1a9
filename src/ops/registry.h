// The op registry: one OpDef per op, holding everything every stage needs to know about it.
// The tensor front end validates and dispatches through it; the capture stage records it;
// later stages add their per-op rules (decomposition, derivative) to the same entry rather
// than to switches in their passes.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "ops/attrs.h"
#include "ops/elementwise.h"
#include "ops/epilogue_act.h"
#include "ops/op_list.h"
#include "zc/tensor.h"

namespace zc::ops {

// Metadata of a value: what shape rules consume and produce.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  bool wrapped_number = false;  // see TensorImpl::wrapped_number
  bool operator==(const TensorMeta&) const = default;
};
TensorMeta meta_of(const Tensor& t);

// Checks inputs and attributes and returns the outputs' metadata; raises zc::Error naming the
// op, the operands and what was expected.
using InferFn = std::vector<TensorMeta> (*)(std::span<const TensorMeta> inputs, const Attrs& attrs);
// Computes on concrete CPU tensors (any strides); `outputs` is what infer returned.
using EagerFn = std::vector<Tensor> (*)(std::span<const Tensor> inputs, const Attrs& attrs,
                                        std::span<const TensorMeta> outputs);

// The eager kernel writing into `outputs` (contiguous, of the metas infer gave), for ops whose
// results are large enough that a copy into a compiled graph's buffer would cost (im2col's
// columns): a compiled graph runs such an op in place rather than through `eager` and a copy.
using EagerIntoFn = void (*)(std::span<const Tensor> inputs, const Attrs& attrs,
                             std::span<const Tensor> outputs);

// Rewrites a composite op in terms of other ops, as ordinary tensor code (zc::exp, zc::sum,
// ...). The lowering stage runs it on traced tensors, so the ops it calls are recorded into the
// lowered graph; run on concrete tensors it computes the same values as the eager kernel,
// which is how decompositions are tested.
using DecomposeFn = std::vector<Tensor> (*)(std::span<const Tensor> inputs, const Attrs& attrs);

// What a derivative rule reads: the values of the forward call (inputs and outputs, as saved
// by autograd), its attributes, the gradient of each output (same shape as the output;
// undefined means zero), and which inputs want a gradient.
struct VjpArgs {
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;
  const Attrs& attrs;
  std::span<const Tensor> grads;
  uint64_t wanted = ~uint64_t{0};  // bit i: input i wants a gradient
  bool wants(size_t i) const { return i >= 64 || ((wanted >> i) & 1) != 0; }
};

// The vector-Jacobian product of an op: each input's gradient, in the input's shape (a rule
// undoes its own broadcasting; ops/derivative.h has the helpers), written as ordinary tensor
// code like a decomposition, so that the same rule runs eagerly for zc::Tensor::backward()
// and traced for a compiled backward graph. An undefined result means no gradient (an
// integer input, or one not wanted). The caller converts results to the input's dtype.
using DerivativeFn = std::vector<Tensor> (*)(const VjpArgs& args);

// Which activation of a library product's epilogue computes the op under these attributes.
using EpilogueActFn = EpilogueAct (*)(const Attrs& attrs);

struct OpDef {
  OpId id = OpId::count;
  std::string_view name;
  OpClass cls = OpClass::unary;
  int min_inputs = 1;
  int max_inputs = 1;      // -1: variadic
  size_t attrs_index = 0;  // which alternative of Attrs the op takes
  InferFn infer = nullptr;
  EagerFn eager = nullptr;
  EagerIntoFn eager_into = nullptr;  // optional
  // Null for primitives, which the code generator handles directly.
  DecomposeFn decompose = nullptr;
  // Null for ops with no derivative (their outputs are integers or booleans, or no rule is
  // written yet): asking a gradient through one raises zc::Error naming it.
  DerivativeFn derivative = nullptr;
  // Elementwise ops (unary, binary, ternary classes): the type they compute in and their C
  // expression in generated code (ops/elementwise.h). Null for every other op.
  ComputeRule compute = ComputeRule::output;
  CExprFn c_expr = nullptr;
  // A transcendental function (exp, log, tanh, sigmoid, erf, GELU, pow, sin, cos, asin, acos,
  // atan): its C expression is a polynomial series with range reduction, tens of instructions
  // per element, so generated code gives it whole vectors where it can (codegen's flat epilogue
  // tails).
  bool transcendental = false;
  // Its output never depends on its input for gradients (detach): eager autograd records
  // nothing, and autodiff of a captured graph stops there (lower::tracked_values).
  bool stops_gradient = false;
  // Its value at an element depends on the element's row-major index in the output (rand_like:
  // a counter-based generator's draw for that index): generated code passes the index as one
  // more operand of its C expression, after the inputs.
  bool reads_element_index = false;
  // An activation that a library product can apply in its own call (ReLU, GELU): a backend
  // runs the op there, after the product's bias and residual, instead of as a loop over the
  // product in memory. Null for every other op.
  EpilogueActFn epilogue_act = nullptr;
};

const OpDef& op_def(OpId id);

// op.infer, with outputs that are never wrapped numbers (an op's result is a tensor even when
// its input was a C++ number) and that live on the inputs' device. Every caller of a shape
// rule goes through this.
std::vector<TensorMeta> infer_outputs(const OpDef& op, std::span<const TensorMeta> inputs,
                                      const Attrs& attrs);
const OpDef* find_op(std::string_view name);  // nullptr when unknown

// The activation op `id` is as a library product's epilogue under `attrs`, or
// EpilogueAct::none when it is none of them.
EpilogueAct epilogue_act(OpId id, const Attrs& attrs);

// The op classes the code generators handle, asked of the registry rather than listed again:
// elementwise ops (one output element from the same position of each broadcast input);
// primitive reductions (reduction ops without a decomposition: sum, amax, amin, argmax);
// views (layout ops without a decomposition: reshape, permute, expand, slice).
bool is_elementwise(OpId id);
bool is_primitive_reduction(OpId id);
bool is_view(OpId id);

// Called once per op class by the registry to fill the table.
class OpTable {
 public:
  void define(OpDef def);
  const OpDef& operator[](OpId id) const { return defs_[static_cast<int>(id)]; }

 private:
  friend const OpDef& op_def(OpId);
  OpDef defs_[kNumOps];
};

template <class A>
constexpr size_t attrs_index_of() {
  return Attrs(A{}).index();
}

}  // namespace zc::ops
