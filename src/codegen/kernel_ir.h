// The kernel IR: what the scheduler produces and a backend emits.
//
// A Schedule is an ordered list of kernels over a lowered (primitive-only) graph. Every graph
// value is either `fused` (it exists only inside the kernel that computes it), `stored` (its
// kernel writes it to a buffer, densely in row-major order), an `alias` (a strided view of a
// stored value, an input or a constant: what view ops become), or an input/constant itself.
// A value is *materialized* when it is in memory: stored, an alias, an input or a constant;
// only materialized values can be read by a kernel other than the one computing them. A kernel
// reads the values it does not compute through their strided views and writes the values
// listed in `stores`.
//
// A *converting alias* is an alias whose base has another dtype than the value: a cast from
// f16/bf16 or i8 to f32 (exact, so reading the base and converting is the cast). Three kinds,
// as the policy allows (schedule.h):
//  - read only by matmul kernels (through views): a library product multiplies the half base
//    directly (SchedulePolicy::matmul_reads_half_operands);
//  - the cast of a graph input, parameter or constant read by nodes whose loads convert
//    (reads_through_converting_loads: elementwise, reductions, attention) or by such matmuls
//    (SchedulePolicy::elementwise_reads_half_inputs);
//  - the cast of an i8 graph input, parameter or constant read only by matmuls, which are then
//    generated (SchedulePolicy::matmul_reads_int8_operands: a weight-only int8 layer).
// Loads through one convert. Nothing else ever reads one: an extern op, a gather or a copy
// would read the base's bits as the value's dtype.
//
// Kernel kinds:
//   pointwise   elementwise nodes over one iteration space (the output shape), broadcasting
//               loads; one loop nest.
//   row_reduce  reductions over `reduce_dims` of `space`, with their elementwise producers
//               (element level) and consumers (element or row level): layer_norm and softmax
//               are one kernel. Row values have `space` with the reduced dims set to 1 (or
//               removed).
//   matmul      one matmul node (`anchor`) and an elementwise epilogue over its output space.
//   concat      one cat node: a copy of each input into its slice of the output.
//   gather      one embedding node.
//   copy        writes a value densely into a buffer of its own (a non-viewable reshape, or a
//               graph output that is an alias, an input or a constant).
//   attention   one node of the attention family (attention, attention_lse, attention_grad) a
//               backend generates whole (Backend::native_ops).
//   extern_op   one node the backend cannot generate: the runtime runs its eager kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/registry.h"

namespace zc::codegen {

// The attention ops: the forward and the log-sum-exp and gradients its derivative computes
// (ops/attention_grad.cpp). A backend that keeps one whole gives it an `attention` kernel.
inline bool is_attention_family(ops::OpId op) {
  return op == ops::OpId::attention || op == ops::OpId::attention_lse ||
         op == ops::OpId::attention_grad;
}

// Whether generated code for `op` reads its operands through loads that convert a converting
// alias (see above).
inline bool reads_through_converting_loads(ops::OpId op) {
  return ops::is_elementwise(op) || ops::is_primitive_reduction(op) || is_attention_family(op);
}

enum class ValueState : uint8_t { unset, fused, stored, alias, input, constant };

// Where a materialized value lives: element (i0..in) at base + offset + sum(i_k * strides[k]).
struct ValueView {
  ir::ValueId base = -1;  // a stored value, an input or a constant
  int64_t offset = 0;
  Shape strides;
};

enum class KernelKind : uint8_t {
  pointwise,
  row_reduce,
  matmul,
  concat,
  gather,
  copy,
  attention,
  extern_op
};
const char* kernel_kind_name(KernelKind k);

struct Kernel {
  KernelKind kind = KernelKind::pointwise;
  std::vector<int32_t> nodes;        // member nodes in graph order (none for an output copy)
  Shape space;                       // iteration space (see above)
  std::vector<int64_t> reduce_dims;  // row_reduce: sorted
  int32_t anchor = -1;               // matmul/concat/gather/extern_op: the node
  bool library = false;  // matmul: the policy sent it to a library (the product is stored)
  // matmul: generated as streamed rows of the right operand, both operands read along k
  // (SchedulePolicy::matmul_streams_rows); its epilogue fused as any generated product's.
  bool rows = false;
  ir::ValueId copy_from = -1, copy_to = -1;  // copy kernels
  std::vector<ir::ValueId> stores;           // values this kernel writes
  bool closed = false;  // scheduling: no more members once another kernel reads from it
};

// What the schedule says about one graph value.
struct ValueSchedule {
  ValueState state = ValueState::unset;
  ValueView view;          // where it lives, for materialized values
  int32_t kernel = -1;     // the kernel that computes it; -1 for inputs, constants and aliases
  bool row_level = false;  // a row value of a row_reduce kernel
};

struct Schedule {
  // The scheduled graph: the input graph plus one extra value (without a producing node) per
  // output copy.
  ir::Graph graph;
  std::vector<Kernel> kernels;        // in execution order
  std::vector<ValueSchedule> values;  // per graph value
  // Graph outputs in order: the value whose buffer is returned. Usually the graph output
  // itself; a fresh copy when the output is an alias, an input or a constant.
  std::vector<ir::ValueId> outputs;
  // Per graph value: bit d is set when dim d varies between the sizes the generated code must
  // serve (a size template, codegen/size_template.h). Empty for code of one size. Such code
  // prints no size as such: every integer derived from sizes goes through the emitter's
  // SizeRecorder, and decisions that depend on a varying size are taken at run time.
  std::vector<uint64_t> varying;

  bool symbolic() const { return !varying.empty(); }
  bool varies(ir::ValueId v) const { return !varying.empty() && varying[v] != 0; }
  // Whether a value kernel k reads or writes varies.
  bool varies(const Kernel& k) const;
  const ValueSchedule& at(ir::ValueId v) const { return values[v]; }
  // The value whose buffer holds v: its view's base when v is an alias, else v.
  ir::ValueId base_of(ir::ValueId v) const {
    return values[v].state == ValueState::alias ? values[v].view.base : v;
  }
};

// Buffers a compiled graph uses, and where each stored value lives.
enum class BufferKind : uint8_t { input, output, constant, arena };

struct BufferPlan {
  struct Slot {
    BufferKind kind = BufferKind::arena;
    int64_t index = 0;  // input/output/constant number, or the arena byte offset
  };
  std::vector<Slot> slot;  // per graph value; meaningful for stored values, inputs, constants
  int64_t arena_bytes = 0;
  std::vector<ir::ValueId> constants;  // constant number -> graph value
};

}  // namespace zc::codegen
