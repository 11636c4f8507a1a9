// KernelEmitter: writes the CUDA C++ of one kernel (a __global__ function) for the CUDA
// backend. Kernel parameters are the buffers the launch plan lists, each a __restrict__
// pointer (the buffer planner guarantees that a kernel's buffers do not overlap). Threads map
// onto the work as the launch plan says: a grid-stride loop over elements for the pointwise
// kinds, a block per row for reductions, a 16x16 tile per block for matmuls, a tile of query rows
// per block for attention.
#pragma once

#include <string>

#include "codegen/backends/cuda/launch.h"
#include "codegen/c_like_emitter.h"
#include "ops/attrs.h"

namespace zc::codegen::cuda {

// An unsigned type of `bytes` bytes that moves a vector in one load or store ("uint4" for 16).
std::string raw_vector_type(size_t bytes);

// Symbols a kernel of code for many sizes can take, and their name in its body, as the index
// type. ZcSym in prelude.h holds exactly kMaxSymbols int64s: the executable passes that many.
inline constexpr size_t kMaxSymbols = 8;
inline constexpr const char* kSymbolArray = "zc_sz";

class KernelEmitter final : private CLikeEmitter {
 public:
  KernelEmitter(const Schedule& s, const BufferPlan& plan, CodeWriter& out)
      : CLikeEmitter(s, plan), out_(out) {}

  void emit(int32_t k, const Launch& launch);
  // The sizes recorded while emitting code for many sizes (size_template.h), in marker order.
  std::vector<int64_t> take_sizes() { return sizes_.take(); }

 private:
  std::string buffer(ir::ValueId base) const override;

  void emit_pointwise(const Kernel& k, const Launch& l);
  void emit_copy(const Kernel& k, const Launch& l);
  void emit_concat(const Kernel& k, const Launch& l);
  void emit_gather(const Kernel& k, const Launch& l);
  void emit_row_reduce(const Kernel& k, const Launch& l);
  void emit_matmul(const Kernel& k, const Launch& l);
  void emit_library_epilogue(const Kernel& k, const Launch& l);
  // An attention node's operands, as both forms of its kernel read them: q [.., tq, d],
  // k [.., tk, d], v [.., tk, dv] and the output o [batch.., tq, dv].
  struct AttentionOperands {
    ops::AttentionAttrs a;
    ir::ValueId Q, K, V, O;
    Shape qs, ks, vs, os, batch;
    int64_t tq, tk, d, dv;
    DType odt;  // the output's dtype
    // The index names of an operand of shape `operand` (its batch dims broadcast onto `batch`,
    // whose names are `b`), then its row and column.
    Names names(const Shape& operand, const Names& b, const std::string& row,
                const std::string& col) const;
  };
  AttentionOperands attention_operands(const Kernel& k) const;
  void emit_attention(const Kernel& k, const Launch& l);
  void emit_attention_tiled(const AttentionOperands& at, const Launch& l, const AttentionTiling& t);

  // Opens a grid-stride loop over `n` elements: the linear index is "zc_i".
  void open_grid_loop(int64_t n);
  // The body of a pointwise kernel (or a library epilogue) over k.space: member nodes other
  // than the anchor, then the stores other than `skip`; in vector steps of launch.vector
  // elements when the pointers are aligned, element by element otherwise.
  void emit_elementwise_loops(const Kernel& k, const Launch& l, ir::ValueId skip);
  void emit_vector_loop(const Kernel& k, const Launch& l, ir::ValueId skip);
  // Declares the index names of `shape` at row-major linear index `linear` ("0" for size-1
  // dims, which get no name).
  Names decompose(const Shape& shape, const std::string& linear, const std::string& prefix);

  CodeWriter& out_;
  const Launch* launch_ = nullptr;
};

}  // namespace zc::codegen::cuda
