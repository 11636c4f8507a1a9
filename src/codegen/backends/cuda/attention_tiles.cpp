// What the tiled attention kernels (the forward and log-sum-exp in attention_tiled.cpp,
// the gradients in attention_backward_tiled.cpp) share: tiles of an operand loaded into
// registers as f32 (16 bytes a load where the layout allows) and stored from them into shared
// memory, and outputs that leave four columns a store.
#include <algorithm>
#include <string>
#include <vector>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"

namespace zc::codegen::cuda {

using ir::ValueId;

namespace {

// Elements of a tile of `elements` each thread loads.
int64_t per_thread(int64_t elements) {
  return (elements + kAttentionThreads - 1) / kAttentionThreads;
}

}  // namespace

int64_t KernelEmitter::AttentionTile::registers() const {
  return per_thread(rows * width);
}

// How many consecutive columns a thread reads with one 16-byte load: when the tile's rows are
// dense and every step's first column sits at a multiple of that many elements, and the row's
// threads divide the block; 1 otherwise. The kernel checks the pointers' alignment when it runs
// (zc_vec) and reads the same elements one by one when they are not aligned.
KernelEmitter::AttentionTile KernelEmitter::attention_tile(ValueId u, int64_t rows,
                                                           int64_t width) const {
  AttentionTile t{.src = u, .rows = rows, .width = width, .vec = 1};
  const ValueView& view = s_.at(u).view;
  const size_t size = dtype_size(s_.graph.meta(s_.base_of(u)).dtype);
  if (size > 4 || view.strides.empty() || view.strides.back() != 1) return t;
  const int64_t v = static_cast<int64_t>(16 / size);
  if (width % v != 0 || view.offset % v != 0) return t;
  const Shape& shape = s_.graph.meta(u).shape;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (shape[i] != 1 && view.strides[i] % v != 0) return t;
  }
  const int64_t row_threads = width / v;
  if (kAttentionThreads % row_threads != 0) return t;
  if (rows % (kAttentionThreads / row_threads) == 0) t.vec = v;
  return t;
}

// Every load of a tile is issued before any is waited for. With vector width v > 1, thread t
// reads columns [(t % (width / v)) * v, + v) of rows t / (width / v) + step * (128 v / width).
// Otherwise, when the width divides 128 (every power-of-two head dim), a thread keeps one
// column and steps over rows; else it takes elements t, t + 128, ... In the first two forms a
// thread's addresses are one base plus constant offsets, which keeps the unrolled loads from
// holding an address register each.
void KernelEmitter::fetch_tile(const AttentionOperands& at, const AttentionTile& t,
                               const std::string& regs, const Names& b, const std::string& first,
                               int64_t limit) {
  const Shape& shape = s_.graph.meta(t.src).shape;
  const int64_t elements = t.rows * t.width, v = t.vec;
  if (v > 1) {
    const int64_t row_threads = t.width / v;
    const DType base = s_.graph.meta(s_.base_of(t.src)).dtype;
    w_.line("#pragma unroll");
    w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements) / v) + "; ++zc_r)");
    w_.line("const idx_t zc_row = " + first + " + zc_r * " + str(kAttentionThreads / row_threads) +
            " + threadIdx.x / " + str(row_threads) + ";");
    w_.line("const int zc_d = (threadIdx.x % " + str(row_threads) + ") * " + str(v) + ";");
    w_.open("if (zc_row >= " + num(limit) + ")");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; ++zc_c) " + regs + "[zc_r * " + str(v) +
            " + zc_c] = 0.f;");
    w_.close();
    w_.open("else if (zc_vec)");
    w_.line("__align__(16) " + storage_type(base) + " zc_h[" + str(v) + "];");
    w_.line("*reinterpret_cast<uint4*>(zc_h) = *reinterpret_cast<const uint4*>(&" +
            element_ref(t.src, at.names(shape, b, "zc_row", "zc_d")) + ");");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; ++zc_c) " + regs + "[zc_r * " + str(v) +
            " + zc_c] = (float)" + from_storage(base, "zc_h[zc_c]") + ";");
    w_.close();
    w_.open("else");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; ++zc_c) " + regs + "[zc_r * " + str(v) +
            " + zc_c] = (float)" + load(t.src, at.names(shape, b, "zc_row", "(zc_d + zc_c)")) +
            ";");
    w_.close();
    w_.close();
    return;
  }
  w_.line("#pragma unroll");
  w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements)) + "; ++zc_r)");
  std::string live;
  if (kAttentionThreads % t.width == 0) {
    w_.line("const idx_t zc_row = " + first + " + zc_r * " + str(kAttentionThreads / t.width) +
            " + threadIdx.x / " + str(t.width) + ";");
    w_.line("const int zc_d = threadIdx.x % " + str(t.width) + ";");
  } else {
    w_.line("const int zc_e = zc_r * " + str(kAttentionThreads) + " + threadIdx.x;");
    w_.line("const idx_t zc_row = " + first + " + zc_e / " + str(t.width) + ";");
    w_.line("const int zc_d = zc_e % " + str(t.width) + ";");
    if (elements % kAttentionThreads != 0) live = "zc_e < " + str(elements) + " && ";
  }
  w_.line(regs + "[zc_r] = " + live + "zc_row < " + num(limit) + " ? (float)" +
          load(t.src, at.names(shape, b, "zc_row", "zc_d")) + " : 0.f;");
  w_.close();
}

// The same places as fetch_tile, in the shared array `smem` [rows][stride].
void KernelEmitter::put_tile(const AttentionTile& t, const std::string& regs,
                             const std::string& smem) {
  const int64_t elements = t.rows * t.width, v = t.vec;
  w_.line("#pragma unroll");
  if (v > 1) {
    const int64_t row_threads = t.width / v;
    w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements) / v) + "; ++zc_r)");
    w_.line("const int zc_pr = zc_r * " + str(kAttentionThreads / row_threads) +
            " + threadIdx.x / " + str(row_threads) + ", zc_pd = (threadIdx.x % " +
            str(row_threads) + ") * " + str(v) + ";");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; zc_c += 4) *reinterpret_cast<float4*>(&" +
            smem + "[zc_pr][zc_pd + zc_c]) = make_float4(" + regs + "[zc_r * " + str(v) +
            " + zc_c], " + regs + "[zc_r * " + str(v) + " + zc_c + 1], " + regs + "[zc_r * " +
            str(v) + " + zc_c + 2], " + regs + "[zc_r * " + str(v) + " + zc_c + 3]);");
  } else if (kAttentionThreads % t.width == 0) {
    w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements)) + "; ++zc_r)");
    w_.line(smem + "[zc_r * " + str(kAttentionThreads / t.width) + " + threadIdx.x / " +
            str(t.width) + "][threadIdx.x % " + str(t.width) + "] = " + regs + "[zc_r];");
  } else {
    w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements)) + "; ++zc_r)");
    w_.line("const int zc_e = zc_r * " + str(kAttentionThreads) + " + threadIdx.x;");
    if (elements % kAttentionThreads != 0) w_.line("if (zc_e >= " + str(elements) + ") break;");
    w_.line(smem + "[zc_e / " + str(t.width) + "][zc_e % " + str(t.width) + "] = " + regs +
            "[zc_r];");
  }
  w_.close();
}

bool KernelEmitter::quad_stores(ValueId out) const {
  const ValueView& view = s_.at(out).view;
  const Shape& shape = s_.graph.meta(out).shape;
  if (view.strides.empty() || view.strides.back() != 1 || view.offset % 4 != 0) return false;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (shape[i] != 1 && view.strides[i] % 4 != 0) return false;
  }
  return true;
}

void KernelEmitter::declare_vector_check(std::vector<ValueId> values) {
  for (ValueId& v : values) v = s_.base_of(v);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string aligned;
  for (ValueId base : values) aligned += "(unsigned long long)" + buffer(base) + " | ";
  if (aligned.empty()) return;
  w_.line("const bool zc_vec = ((" + aligned.substr(0, aligned.size() - 3) + ") & 15) == 0;");
}

void KernelEmitter::store_quad(const AttentionOperands& at, const Names& b, const std::string& row,
                               const std::string& col, bool vec,
                               const std::function<std::string(const std::string&)>& value) {
  if (vec) {
    const std::string raw = raw_vector_type(4 * dtype_size(at.odt));
    w_.open("if (zc_vec)");
    w_.line("__align__(16) " + storage_type(at.odt) + " zc_oh[4];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < 4; ++zc_c) zc_oh[zc_c] = " +
            to_storage(at.odt, value("zc_c")) + ";");
    w_.line("*reinterpret_cast<" + raw + "*>(&" + element_ref(at.O, at.names(at.os, b, row, col)) +
            ") = *reinterpret_cast<const " + raw + "*>(zc_oh);");
    w_.close();
    w_.open("else");
  }
  const std::string reg = "v" + std::to_string(at.O);
  w_.line("#pragma unroll");
  w_.open("for (int zc_c = 0; zc_c < 4; ++zc_c)");
  w_.line("const float " + reg + " = " + value("zc_c") + ";");
  w_.line(store(at.O, at.names(at.os, b, row, "(" + col + " + zc_c)"), reg));
  w_.close();
  if (vec) w_.close();
}

}  // namespace zc::codegen::cuda
