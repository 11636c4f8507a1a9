// The value-access layer every C-like kernel emitter shares (C++ on the CPU, CUDA C++): where a
// value of the schedule is read or written at an index, which values are registers of the
// kernel being written, and the code of an elementwise member node (c_expr.h); and the
// structure of the kernel kinds whose code differs between the backends only in how the work
// maps onto loops or threads (row reductions, concatenations). A backend's emitter derives
// from it, says how a kernel reaches the buffers it touches (buffer()) and how those kinds' work
// is mapped (the hooks), and writes the other kinds itself.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/buffer_plan.h"
#include "codegen/code_writer.h"
#include "codegen/size_template.h"
#include "ops/attrs.h"
#include "ops/shape_rules.h"

namespace zc::codegen {

// How a kernel reads value u: from a register when kernel k computes it (and it is neither a
// view nor the product a library wrote to memory, `library_output`); as a literal when it is a
// one-element constant; otherwise from memory. Launch planning asks the same questions.
bool in_kernel_register(const Schedule& s, int32_t k, ir::ValueId u, ir::ValueId library_output);
bool read_as_literal(const Schedule& s, ir::ValueId u);

class CLikeEmitter {
 public:
  using Names = std::vector<std::string>;
  virtual ~CLikeEmitter() = default;

 protected:
  CLikeEmitter(const Schedule& s, const BufferPlan& plan)
      : s_(s), plan_(plan), sizes_(s.symbolic()) {}

  // Every integer derived from sizes is printed through num(): the number for code of one
  // size, a recorded marker for a size template (size_template.h).
  std::string num(int64_t n) const { return sizes_(n); }
  // Whether any dim of value v varies between the sizes the code serves (Schedule::varying).
  bool varies(ir::ValueId v) const { return s_.varies(v); }

  // The name, inside the kernel being written, of a pointer to the first element of the buffer
  // holding base value `base` (a stored value, an input or a constant), typed as its storage.
  virtual std::string buffer(ir::ValueId base) const = 0;

  // Element of materialized value u at index names for u's own dims ("0" for a dim that is
  // not looped over): an lvalue, and the same converted to u's compute type.
  std::string element_ref(ir::ValueId u, const Names& idx) const;
  std::string load(ir::ValueId u, const Names& idx) const;
  // The statement storing register `reg` into v at `idx`, converted to v's storage type.
  std::string store(ir::ValueId v, const Names& idx, const std::string& reg) const;
  // How input u of a node with output shape `out` (index names `names`) is read: its register,
  // a literal for a one-element constant, or a broadcast load.
  std::string operand(ir::ValueId u, const Shape& out, const Names& names) const;
  // Index names of a value of shape `from` broadcast to `to`, whose names are `names`.
  static Names broadcast(const Shape& from, const Shape& to, const Names& names);
  // The row-major index, as an int64_t expression, of the element at index names `names` (the
  // last shape.size() of them) of a value of `shape`: the operand an op that reads its
  // element's index gets (OpDef::reads_element_index).
  std::string row_major_index(const Shape& shape, const Names& names) const;
  // Declares and computes the register "v<id>" of elementwise node n's output.
  void emit_node(int32_t n, const Names& names);
  bool in_register(ir::ValueId u) const;
  // The member nodes of the kernel being written that `targets` need at element level (row
  // values excluded), in graph order.
  std::vector<int32_t> element_closure(const std::vector<ir::ValueId>& targets) const;

  // How the row values of a row_reduce kernel are indexed, given its row's index names (the
  // kept dims' names, "0" for the reduced ones): by the kept dims, with the reduced dims as 1
  // (`keep`) or removed (`squeezed`).
  struct RowIndex {
    Shape keep_shape, squeezed_shape;
    Names keep, squeezed;
    const Names& of(const Shape& value_shape) const {
      return value_shape == keep_shape ? keep : squeezed;
    }
  };
  static RowIndex row_index(const Kernel& k, const Names& row);

  // A matmul's operand index names: C's batch dims, then its rows and columns where present;
  // A's and B's batch dims broadcast from C's.
  struct MatmulIndex {
    ops::MatmulShapes d;
    Shape a_batch, b_batch;
    Names c(const Names& batch, const std::string& i, const std::string& j) const;
    Names a(const Names& batch, const std::string& i, const std::string& k) const;
    Names b(const Names& batch, const std::string& k, const std::string& j) const;
  };
  static MatmulIndex matmul_index(const Shape& a, const Shape& b);

  // An attention-family node's operands (kernel_ir.h), as every backend's attention kernels read
  // them: q [.., tq, d], k [.., tk, d], v [.., tk, dv] (none for attention_lse; dv is then 0), and
  // for attention_grad g [.., tq, dv], lse and delta [.., tq]; the output o, [batch.., tq, dv] for
  // attention, [batch.., tq] for attention_lse, the gradient `wrt` for attention_grad.
  struct AttentionOperands {
    ops::OpId op = ops::OpId::attention;
    ops::AttentionAttrs a;  // causal and scale, whichever op
    ops::AttentionWrt wrt = ops::AttentionWrt::q;
    ir::ValueId Q = -1, K = -1, V = -1, G = -1, LSE = -1, DELTA = -1, O = -1;
    // attention's mask (its fourth input, ops/attention.cpp), -1 for none: boolean (which keys
    // a row sees) or floating (added to the scaled scores), of shape ms.
    ir::ValueId M = -1;
    bool mask_keeps = false;
    Shape qs, ks, vs, gs, os, ms, batch;
    int64_t tq = 0, tk = 0, d = 0, dv = 0;
    DType odt = DType::f32;  // the output's dtype
    // The index names of an operand of shape `operand` (its batch dims broadcast onto `batch`,
    // whose names are `b`), then its row and column.
    Names names(const Shape& operand, const Names& b, const std::string& row,
                const std::string& col) const;
    // The mask's element of query `row` and key `col`; its size-1 dims broadcast.
    Names mask_names(const Names& b, const std::string& row, const std::string& col) const;
    // The same for a per-query-row operand [.., tq] (lse, delta, attention_lse's output).
    Names row_names(const Shape& operand, const Names& b, const std::string& row) const;
    // attention_grad's: whether its rows are query rows (dq) rather than key rows (dk, dv);
    // whether it computes dk, dv; whether it needs dS = P (dP - delta) (dq and dk do, dv only P).
    bool query_side() const { return wrt == ops::AttentionWrt::q; }
    bool wants_k() const { return wrt == ops::AttentionWrt::k || wrt == ops::AttentionWrt::kv; }
    bool wants_v() const { return wrt == ops::AttentionWrt::v || wrt == ops::AttentionWrt::kv; }
    bool needs_ds() const { return query_side() || wants_k(); }
  };
  AttentionOperands attention_operands(const Kernel& k) const;
  // The mask of `at` (none: nothing changes) applied to one score: a boolean mask joins the
  // condition `seen` (the key is seen), a floating one is added to the expression `score`, in
  // compute type `T`; the element of query `row` and key `col` of batch item `b`.
  void apply_attention_mask(const AttentionOperands& at, const Names& b, const std::string& row,
                            const std::string& col, const std::string& T, std::string& seen,
                            std::string& score) const;

  // A row_reduce kernel, row by row: its row-level member nodes in graph order, each reduction
  // a pass over the row's elements that computes the element values it needs on the way; then
  // one more pass for the element values stored, and the row values' stores.
  void emit_row_reduce(const Kernel& k);
  // A cat: each input with elements copied into its place in the output, in a scope of its own.
  void emit_concat(const Kernel& k);

  // The hooks: how the work of the two kinds above maps onto the backend's loops or threads.
  //
  // Row reductions. One reduction of a row_reduce kernel: `op` (sum, amax, amin or argmax) of
  // element value `in`, of dtype `type`, into row value `out`, through the accumulator `acc`.
  struct Reduction {
    ops::OpId op;
    ir::ValueId in, out;
    DType type;
    std::string acc;
  };
  // Opens what visits the rows of row_reduce kernel k, whose space is `outer` (the reduced dims
  // as 1) by `inner` (the kept dims as 1), and returns a row's index names (the kept dims'
  // names, "0" for the reduced ones); nothing when the kernel has no work, which then writes
  // nothing (not even close_rows()).
  virtual std::optional<Names> open_rows(const Kernel& k, const Shape& outer,
                                         const Shape& inner) = 0;
  virtual void close_rows() = 0;
  // Declares r's accumulator, before the pass that fills it.
  virtual void declare_accumulator(const Reduction& r) = 0;
  // Opens a pass over the row's elements (`inner`'s dims) for reduction `r`, or for the element
  // stores when null; returns the index names of the reduced dims. close_pass() closes it.
  virtual Names open_pass(const Shape& inner, const Reduction* r) = 0;
  virtual void close_pass() = 0;
  // The statements adding element `x` (r's input, in its compute type) to r's accumulator.
  virtual void accumulate(const Reduction& r, const std::string& x) = 0;
  // After r's pass: combines what it accumulated; returns the expression of r's value.
  virtual std::string reduced(const Reduction& r) = 0;
  // Which of the threads that share a row store its row values: a condition, empty where each
  // row is one thread's.
  virtual std::string row_store_condition() const = 0;
  //
  // Concatenations. Opens a scope that visits every element of `shape` once (`varies`: its
  // dims may vary between the sizes the code serves) and returns the elements' index names ("0"
  // for size-1 dims); close_elements() closes it.
  virtual Names open_elements(const Shape& shape, bool varies) = 0;
  virtual void close_elements() = 0;

  const Schedule& s_;
  const BufferPlan& plan_;
  mutable SizeRecorder sizes_;
  CodeWriter w_{1};  // the body of the kernel being written
  int32_t kernel_ = -1;
  ir::ValueId library_output_ = -1;  // a matmul result a library wrote: read from memory
  // Values the backend's loop has already loaded into registers, and the expression (in the
  // value's compute type) each operand() of them becomes instead of a load.
  std::vector<std::pair<ir::ValueId, std::string>> staged_;
};

}  // namespace zc::codegen
