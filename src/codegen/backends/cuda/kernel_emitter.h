// KernelEmitter: writes the CUDA C++ of one kernel (a __global__ function) for the CUDA
// backend. Kernel parameters are the buffers the launch plan lists, each a __restrict__
// pointer (the buffer planner guarantees that a kernel's buffers do not overlap). Threads map
// onto the work as the launch plan says: a grid-stride loop over elements for the pointwise
// kinds, a block per row for reductions, a 16x16 tile per block for matmuls, a tile of query rows
// per block for attention.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/backends/cuda/launch.h"
#include "codegen/c_like_emitter.h"
#include "ops/attrs.h"

namespace zc::codegen::cuda {

// An integer of generated code that no size template varies (tile shapes, head dims, thread
// counts); sizes that may vary are printed through CLikeEmitter::num().
inline std::string str(int64_t v) {
  return std::to_string(v);
}

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
  // An attention-family node's operands (kernel_ir.h), as every form of its kernels reads them:
  // q [.., tq, d], k [.., tk, d], v [.., tk, dv] (none for attention_lse; dv is then 0), and for
  // attention_grad g [.., tq, dv], lse and delta [.., tq]; the output o, [batch.., tq, dv] for
  // attention, [batch.., tq] for attention_lse, the gradient `wrt` for attention_grad.
  struct AttentionOperands {
    ops::OpId op = ops::OpId::attention;
    ops::AttentionAttrs a;  // causal and scale, whichever op
    ops::AttentionWrt wrt = ops::AttentionWrt::q;
    ir::ValueId Q = -1, K = -1, V = -1, G = -1, LSE = -1, DELTA = -1, O = -1;
    Shape qs, ks, vs, gs, os, batch;
    int64_t tq = 0, tk = 0, d = 0, dv = 0;
    DType odt = DType::f32;  // the output's dtype
    // The index names of an operand of shape `operand` (its batch dims broadcast onto `batch`,
    // whose names are `b`), then its row and column.
    Names names(const Shape& operand, const Names& b, const std::string& row,
                const std::string& col) const;
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
  void emit_attention(const Kernel& k, const Launch& l);
  void emit_attention_tiled(const AttentionOperands& at, const Launch& l, const AttentionTiling& t);
  void emit_attention_grad_rows(const AttentionOperands& at, const Launch& l,
                                const AttentionGradTiling& t);
  void emit_attention_grad_tiled(const AttentionOperands& at, const Launch& l,
                                 const AttentionGradTiling& t);

  // The tiled attention kernels' staging (kernel_attention_tiles.cpp): a tile of `rows` rows
  // and all `width` columns of operand `src`, loaded into registers (as f32) by fetch_tile and
  // stored from them into a shared array by put_tile, so that the loads of the next tile are in
  // flight while the current one is used.
  struct AttentionTile {
    ir::ValueId src = -1;
    int64_t rows = 0, width = 0;
    int64_t vec = 1;            // elements per 16-byte load (checked at run time by zc_vec), or 1
    int64_t registers() const;  // the register array's length
    // A shared tile's row stride in floats: at least `width`, and 4 mod 32 words, so that the
    // eight threads of a 16-byte access phase reading eight consecutive rows hit distinct banks.
    static int64_t stride(int64_t width) { return (width + 31) / 32 * 32 + 4; }
  };
  AttentionTile attention_tile(ir::ValueId src, int64_t rows, int64_t width) const;
  // Rows [first, first + rows) of the tile into `regs`, zeros at rows from `limit` on.
  void fetch_tile(const AttentionOperands& at, const AttentionTile& t, const std::string& regs,
                  const Names& b, const std::string& first, int64_t limit);
  void put_tile(const AttentionTile& t, const std::string& regs, const std::string& smem);
  // Whether output `out`'s groups of four columns (a multiple of four apart) can leave in one
  // store: dense rows, offsets and row strides multiples of four elements.
  bool quad_stores(ir::ValueId out) const;
  // Declares `zc_vec`: whether the buffers of `values` start on 16-byte boundaries.
  void declare_vector_check(std::vector<ir::ValueId> values);
  // Stores columns col..col+3 of row `row` of the output, value(c) being column col + c's f32
  // expression of "zc_c": in one store when `vec` (and zc_vec holds), one by one otherwise.
  void store_quad(const AttentionOperands& at, const Names& b, const std::string& row,
                  const std::string& col, bool vec,
                  const std::function<std::string(const std::string&)>& value);

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
