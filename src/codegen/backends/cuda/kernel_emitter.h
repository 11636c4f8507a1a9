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
  // A pack (packs.h), `first` its first member: each member as a device function, then the
  // pack's kernel.
  void emit_pack(int32_t first, const std::vector<Launch>& launches);
  // The sizes recorded while emitting code for many sizes (size_template.h), in marker order.
  std::vector<int64_t> take_sizes() { return sizes_.take(); }

 private:
  std::string buffer(ir::ValueId base) const override;
  // Kernel k as a __global__ function, or as a pack's member (a device function).
  void emit_function(int32_t k, const Launch& launch, bool member);
  // A kernel's pointer parameters: `buffers` (written ones without const), then the error flag.
  std::string parameters(const std::vector<ir::ValueId>& buffers, bool error_flag) const;

  void emit_pointwise(const Kernel& k, const Launch& l);
  void emit_copy(const Kernel& k, const Launch& l);
  void emit_gather(const Kernel& k, const Launch& l);
  void emit_matmul(const Kernel& k, const Launch& l);
  void emit_matmul_rows(const Kernel& k, const Launch& l);
  void emit_library_epilogue(const Kernel& k, const Launch& l);
  void emit_attention(const Kernel& k, const Launch& l);
  void emit_attention_tiled(const AttentionOperands& at, const Launch& l, const AttentionTiling& t);
  // A masked attention (attention_keys.cpp), `rows` query rows a block.
  void emit_attention_keys(const AttentionOperands& at, const Launch& l, int64_t rows);
  void emit_attention_grad_rows(const AttentionOperands& at, const Launch& l,
                                const AttentionGradTiling& t);
  void emit_attention_grad_tiled(const AttentionOperands& at, const Launch& l,
                                 const AttentionGradTiling& t);

  // The tiled attention kernels' staging (attention_tiles.cpp): a tile of `rows` rows
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
  // A grid-stride loop over the shape's elements.
  Names open_elements(const Shape& shape, bool varies) override;
  void close_elements() override { w_.close(); }
  // Row reductions: a block per row (or, in the column form, kColumnRows rows per block along x,
  // each shared by the threads along y); a pass strides over the row by the threads sharing
  // it, whose partial results the block then combines.
  std::optional<Names> open_rows(const Kernel& k, const Shape& outer, const Shape& inner) override;
  void close_rows() override { w_.close(); }
  void declare_accumulator(const Reduction& r) override;
  Names open_pass(const Shape& inner, const Reduction* r) override;
  void close_pass() override { w_.close(); }
  void accumulate(const Reduction& r, const std::string& x) override;
  std::string reduced(const Reduction& r) override;
  std::string row_store_condition() const override;
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
