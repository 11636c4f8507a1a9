// Attention as one kernel, the tiled form (launch.h's attention_tiling): softmax(q k^T * scale
// [causal]) v in f32 registers, for head dims that are multiples of 4 up to 128, without the
// [Tq, Tk] scores in memory. It is the shape of a FlashAttention kernel written for the CUDA
// cores: the work of a tile is two small matrix products, so each value read from shared
// memory feeds several multiply-adds, and the softmax's bookkeeping is paid once per row and
// tile instead of once per key.
//
// A block of 128 threads takes 32 query rows of one batch item; thread (ty, tx) of the 8 x 16
// grid owns rows ty + 8i (i < 4). Tiles are loaded into registers (converted to f32) one tile
// ahead, so that their memory latency overlaps the previous tile's arithmetic and the query,
// key and value tiles are waited for once, then stored to shared memory. Dense rows are read 16
// bytes a load (4 f32 or 8 bf16) when the pointers are aligned, element by element otherwise,
// and a thread's four output columns leave in one store. Per tile of `keys` keys:
//   1. With K's tile in shared memory, the thread computes the scores of its 4 rows against
//      keys tx + 16j: 4 x keys/16 dot products, reading float4s of the query tile (the same
//      address across a row's threads: a broadcast) and of the key tile (row strides of 4 mod
//      32 words, so 8 threads reading 8 rows hit distinct banks).
//   2. The online softmax: a row's maximum over the tile is combined across its 16 threads with
//      shuffles; the accumulator and the thread's partial sum are rescaled when it grows, and
//      the probabilities go to a shared [32, keys] tile. Masked keys (past the end, or after
//      the row under the causal mask) score -inf and weigh 0.
//   3. V's tile replaces K's; the thread adds P[rows, keys] V[keys, cols] for its rows and the
//      columns 4tx + 64g + c (float4 reads of consecutive 16 bytes across a row's threads).
// At the end the partial sums are summed across the row's threads and the rows divided by them.
// Scores are scaled after the dot product, as the CPU backend does; a row that saw no key at
// all (an empty Tk) is zeros. A causal block stops at the last key its last row sees.
#include <algorithm>
#include <string>
#include <vector>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/attrs.h"

namespace zc::codegen::cuda {

using ir::ValueId;

namespace {

constexpr int kColThreads = 16;                               // tx: threads along keys/cols
constexpr int kRowThreads = kAttentionThreads / kColThreads;  // ty
constexpr int kRowsPerThread = kAttentionTileRows / kRowThreads;

// A shared tile's row stride in floats: at least `width`, and 4 mod 32 words, so that the eight
// threads of a 16-byte access phase reading eight consecutive rows fall on distinct banks.
int64_t tile_stride(int64_t width) {
  return (width + 31) / 32 * 32 + 4;
}

// Elements of a tile of `elements` each thread loads.
int64_t per_thread(int64_t elements) {
  return (elements + kAttentionThreads - 1) / kAttentionThreads;
}

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

void KernelEmitter::emit_attention_tiled(const AttentionOperands& at, const Launch& l,
                                         const AttentionTiling& t) {
  const int64_t kt = t.keys, kpt = kt / kColThreads, groups = (at.dv + 63) / 64;
  const int64_t q_stride = tile_stride(at.d), kv_stride = tile_stride(std::max(at.d, at.dv));
  const int64_t p_stride = tile_stride(kt);
  const std::string RPT = str(kRowsPerThread), KPT = str(kpt), RT = str(kRowThreads);
  const std::string D = str(at.d), DV = str(at.dv), KT = str(kt), BQ = str(kAttentionTileRows);
  const std::string NT = str(kAttentionThreads);
  const std::string scale = literal(at.a.scale, DType::f32);

  // How many consecutive columns of `u` (a tile of `rows` rows and `width` columns) a thread
  // reads with one 16-byte load: when its rows are dense and every step's first column sits at
  // a multiple of that many elements, and the row's threads divide the block; 1 otherwise. The
  // kernel checks the pointers' alignment when it runs (zc_vec) and reads the same elements one
  // by one when they are not aligned.
  auto vector_of = [&](ValueId u, int64_t rows, int64_t width) -> int64_t {
    const ValueView& view = s_.at(u).view;
    const size_t size = dtype_size(s_.graph.meta(s_.base_of(u)).dtype);
    if (size > 4 || view.strides.empty() || view.strides.back() != 1) return 1;
    const int64_t v = static_cast<int64_t>(16 / size);
    if (width % v != 0 || view.offset % v != 0) return 1;
    const Shape& shape = s_.graph.meta(u).shape;
    for (size_t i = 0; i + 1 < shape.size(); ++i) {
      if (shape[i] != 1 && view.strides[i] % v != 0) return 1;
    }
    const int64_t row_threads = width / v;
    if (kAttentionThreads % row_threads != 0) return 1;
    return rows % (kAttentionThreads / row_threads) == 0 ? v : 1;
  };
  const int64_t q_vec = vector_of(at.Q, kAttentionTileRows, at.d),
                k_vec = vector_of(at.K, kt, at.d);
  const int64_t v_vec = vector_of(at.V, kt, at.dv);

  // Loads rows [first, first + rows) of `src` (all its `width` columns) as floats into the
  // registers `regs`, zeros past `limit` rows. Every load of a tile is issued before any is
  // waited for. With vector width `v` > 1, thread t reads columns [(t % (width / v)) * v, + v)
  // of rows t / (width / v) + step * (128 v / width). Otherwise, when the width divides 128
  // (every power-of-two head dim), a thread keeps one column and steps over rows; else it takes
  // elements t, t + 128, ... In the first two forms a thread's addresses are one base plus
  // constant offsets, which keeps the unrolled loads from holding an address register each.
  auto fetch = [&](const std::string& regs, ValueId src, const Shape& shape, const Names& b,
                   int64_t rows, int64_t width, const std::string& first, int64_t limit,
                   int64_t v) {
    const int64_t elements = rows * width;
    if (v > 1) {
      const int64_t row_threads = width / v;
      const DType base = s_.graph.meta(s_.base_of(src)).dtype;
      w_.line("#pragma unroll");
      w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements) / v) + "; ++zc_r)");
      w_.line("const idx_t zc_row = " + first + " + zc_r * " +
              str(kAttentionThreads / row_threads) + " + threadIdx.x / " + str(row_threads) + ";");
      w_.line("const int zc_d = (threadIdx.x % " + str(row_threads) + ") * " + str(v) + ";");
      w_.open("if (zc_row >= " + num(limit) + ")");
      w_.line("#pragma unroll");
      w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; ++zc_c) " + regs + "[zc_r * " + str(v) +
              " + zc_c] = 0.f;");
      w_.close();
      w_.open("else if (zc_vec)");
      w_.line("__align__(16) " + storage_type(base) + " zc_h[" + str(v) + "];");
      w_.line("*reinterpret_cast<uint4*>(zc_h) = *reinterpret_cast<const uint4*>(&" +
              element_ref(src, at.names(shape, b, "zc_row", "zc_d")) + ");");
      w_.line("#pragma unroll");
      w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; ++zc_c) " + regs + "[zc_r * " + str(v) +
              " + zc_c] = (float)" + from_storage(base, "zc_h[zc_c]") + ";");
      w_.close();
      w_.open("else");
      w_.line("#pragma unroll");
      w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; ++zc_c) " + regs + "[zc_r * " + str(v) +
              " + zc_c] = (float)" + load(src, at.names(shape, b, "zc_row", "(zc_d + zc_c)")) +
              ";");
      w_.close();
      w_.close();
      return;
    }
    w_.line("#pragma unroll");
    w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements)) + "; ++zc_r)");
    std::string live;
    if (kAttentionThreads % width == 0) {
      w_.line("const idx_t zc_row = " + first + " + zc_r * " + str(kAttentionThreads / width) +
              " + threadIdx.x / " + str(width) + ";");
      w_.line("const int zc_d = threadIdx.x % " + str(width) + ";");
    } else {
      w_.line("const int zc_e = zc_r * " + NT + " + threadIdx.x;");
      w_.line("const idx_t zc_row = " + first + " + zc_e / " + str(width) + ";");
      w_.line("const int zc_d = zc_e % " + str(width) + ";");
      if (elements % kAttentionThreads != 0) live = "zc_e < " + str(elements) + " && ";
    }
    w_.line(regs + "[zc_r] = " + live + "zc_row < " + num(limit) + " ? (float)" +
            load(src, at.names(shape, b, "zc_row", "zc_d")) + " : 0.f;");
    w_.close();
  };
  // Stores what fetch() loaded into the shared tile `tile`, in the same places.
  auto put = [&](const std::string& regs, const char* tile, int64_t rows, int64_t width,
                 int64_t v) {
    const int64_t elements = rows * width;
    w_.line("#pragma unroll");
    if (v > 1) {
      const int64_t row_threads = width / v;
      w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements) / v) + "; ++zc_r)");
      w_.line("const int zc_pr = zc_r * " + str(kAttentionThreads / row_threads) +
              " + threadIdx.x / " + str(row_threads) + ", zc_pd = (threadIdx.x % " +
              str(row_threads) + ") * " + str(v) + ";");
      w_.line("#pragma unroll");
      w_.line("for (int zc_c = 0; zc_c < " + str(v) + "; zc_c += 4) *reinterpret_cast<float4*>(&" +
              tile + "[zc_pr][zc_pd + zc_c]) = make_float4(" + regs + "[zc_r * " + str(v) +
              " + zc_c], " + regs + "[zc_r * " + str(v) + " + zc_c + 1], " + regs + "[zc_r * " +
              str(v) + " + zc_c + 2], " + regs + "[zc_r * " + str(v) + " + zc_c + 3]);");
    } else if (kAttentionThreads % width == 0) {
      w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements)) + "; ++zc_r)");
      w_.line(std::string(tile) + "[zc_r * " + str(kAttentionThreads / width) +
              " + threadIdx.x / " + str(width) + "][threadIdx.x % " + str(width) + "] = " + regs +
              "[zc_r];");
    } else {
      w_.open("for (int zc_r = 0; zc_r < " + str(per_thread(elements)) + "; ++zc_r)");
      w_.line("const int zc_e = zc_r * " + NT + " + threadIdx.x;");
      if (elements % kAttentionThreads != 0) w_.line("if (zc_e >= " + str(elements) + ") break;");
      w_.line(std::string(tile) + "[zc_e / " + str(width) + "][zc_e % " + str(width) +
              "] = " + regs + "[zc_r];");
    }
    w_.close();
  };

  w_.line("__shared__ __align__(16) float zc_qs[" + BQ + "][" + str(q_stride) + "];");
  w_.line("__shared__ __align__(16) float zc_kv[" + KT + "][" + str(kv_stride) + "];");
  w_.line("__shared__ __align__(16) float zc_p[" + BQ + "][" + str(p_stride) + "];");
  w_.line("const int zc_tx = threadIdx.x % " + str(kColThreads) + ", zc_ty = threadIdx.x / " +
          str(kColThreads) + ";");
  w_.line("const idx_t zc_q0 = (idx_t)blockIdx.x * " + BQ + ";");
  // The keys this block's rows see: all, or (causal) up to its last row.
  w_.line("const idx_t zc_end = " +
          (at.a.causal ? "min((idx_t)" + num(at.tk) + ", zc_q0 + " + BQ + ")" : num(at.tk)) + ";");
  // Whether the operands read with vector loads, and the output, start on 16-byte boundaries.
  std::vector<ValueId> checked;
  for (auto [u, v] : {std::pair{at.Q, q_vec}, std::pair{at.K, k_vec}, std::pair{at.V, v_vec}}) {
    if (v > 1) checked.push_back(s_.base_of(u));
  }
  // The output's rows are dense; its groups of four columns can leave in one store when its
  // offset and row strides are multiples of four elements.
  const ValueView& o_view = s_.at(at.O).view;
  bool o_vec = !o_view.strides.empty() && o_view.strides.back() == 1 && o_view.offset % 4 == 0;
  for (size_t i = 0; i + 1 < at.os.size(); ++i) {
    if (at.os[i] != 1 && o_view.strides[i] % 4 != 0) o_vec = false;
  }
  if (o_vec) checked.push_back(s_.base_of(at.O));
  std::sort(checked.begin(), checked.end());
  checked.erase(std::unique(checked.begin(), checked.end()), checked.end());
  std::string aligned;
  for (ValueId base : checked) aligned += "(unsigned long long)" + buffer(base) + " | ";
  if (!aligned.empty()) {
    w_.line("const bool zc_vec = ((" + aligned.substr(0, aligned.size() - 3) + ") & 15) == 0;");
  }
  w_.open("for (idx_t zc_z = blockIdx.y; zc_z < " + num(l.grid_y) + "; zc_z += gridDim.y)");
  Names b = decompose(at.batch, "zc_z", "zb");
  // The query tile and the first key and value tiles are loaded together.
  w_.line("float zc_rq[" + str(per_thread(kAttentionTileRows * at.d)) + "], zc_rk[" +
          str(per_thread(kt * at.d)) + "], zc_rv[" + str(per_thread(kt * at.dv)) + "];");
  fetch("zc_rq", at.Q, at.qs, b, kAttentionTileRows, at.d, "zc_q0", at.tq, q_vec);
  w_.open("if (zc_end > 0)");
  fetch("zc_rk", at.K, at.ks, b, kt, at.d, "(idx_t)0", at.tk, k_vec);
  fetch("zc_rv", at.V, at.vs, b, kt, at.dv, "(idx_t)0", at.tk, v_vec);
  w_.close();
  // The previous batch item's readers of the query tile are past the barriers of its last tile.
  w_.line("__syncthreads();");
  put("zc_rq", "zc_qs", kAttentionTileRows, at.d, q_vec);
  w_.line("float zc_m[" + RPT + "], zc_l[" + RPT + "], zc_o[" + RPT + "][" + str(4 * groups) +
          "];");
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("zc_m[zc_i] = -INFINITY;");
  w_.line("zc_l[zc_i] = 0.f;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_c = 0; zc_c < " + str(4 * groups) + "; ++zc_c) zc_o[zc_i][zc_c] = 0.f;");
  w_.close();

  w_.open("for (idx_t zc_k0 = 0; zc_k0 < zc_end; zc_k0 += " + KT + ")");
  // Everyone is done with the last tile's V (and, the first time, the query tile is written).
  w_.line("__syncthreads();");
  put("zc_rk", "zc_kv", kt, at.d, k_vec);
  w_.line("__syncthreads();");
  // 1. Scores of this thread's rows and keys.
  w_.line("float zc_s[" + RPT + "][" + KPT + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("  for (int zc_j = 0; zc_j < " + KPT + "; ++zc_j) zc_s[zc_i][zc_j] = 0.f;");
  w_.line("#pragma unroll");
  w_.open("for (int zc_dd = 0; zc_dd < " + D + "; zc_dd += 4)");
  w_.line("float4 zc_qv[" + RPT + "], zc_kv4[" + KPT + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + RPT +
          "; ++zc_i) zc_qv[zc_i] = *reinterpret_cast<const float4*>(&zc_qs[zc_ty + " + RT +
          " * zc_i][zc_dd]);");
  w_.line("#pragma unroll");
  w_.line("for (int zc_j = 0; zc_j < " + KPT +
          "; ++zc_j) zc_kv4[zc_j] = *reinterpret_cast<const float4*>(&zc_kv[zc_tx + " +
          str(kColThreads) + " * zc_j][zc_dd]);");
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("#pragma unroll");
  w_.open("for (int zc_j = 0; zc_j < " + KPT + "; ++zc_j)");
  for (const char* c : {"x", "y", "z", "w"}) {
    w_.line(std::string("zc_s[zc_i][zc_j] += zc_qv[zc_i].") + c + " * zc_kv4[zc_j]." + c + ";");
  }
  w_.close();
  w_.close();
  w_.close();
  // 2. The online softmax, row by row.
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("const idx_t zc_q = zc_q0 + zc_ty + " + RT + " * zc_i;");
  w_.line("float zc_mx = -INFINITY;");
  w_.line("#pragma unroll");
  w_.open("for (int zc_j = 0; zc_j < " + KPT + "; ++zc_j)");
  w_.line("const idx_t zc_key = zc_k0 + zc_tx + " + str(kColThreads) + " * zc_j;");
  w_.line("zc_s[zc_i][zc_j] = zc_key < zc_end" +
          std::string(at.a.causal ? " && zc_key <= zc_q" : "") + " ? zc_s[zc_i][zc_j] * " + scale +
          " : -INFINITY;");
  w_.line("zc_mx = fmaxf(zc_mx, zc_s[zc_i][zc_j]);");
  w_.close();
  w_.line("#pragma unroll");
  w_.line("for (int zc_off = " + str(kColThreads / 2) +
          "; zc_off > 0; zc_off /= 2) zc_mx = fmaxf(zc_mx, __shfl_xor_sync(0xffffffffu, zc_mx, "
          "zc_off));");
  w_.line("const float zc_mn = fmaxf(zc_m[zc_i], zc_mx);");
  // No visible key yet (the maximum is still -inf): nothing to add, and nothing to rescale.
  w_.line("const float zc_corr = zc_mn == -INFINITY ? 1.f : zc_exp(zc_m[zc_i] - zc_mn);");
  w_.line("zc_m[zc_i] = zc_mn;");
  w_.line("zc_l[zc_i] *= zc_corr;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_c = 0; zc_c < " + str(4 * groups) +
          "; ++zc_c) zc_o[zc_i][zc_c] *= zc_corr;");
  w_.line("#pragma unroll");
  w_.open("for (int zc_j = 0; zc_j < " + KPT + "; ++zc_j)");
  w_.line(
      "const float zc_pj = zc_s[zc_i][zc_j] == -INFINITY ? 0.f : zc_exp(zc_s[zc_i][zc_j] - "
      "zc_mn);");
  w_.line("zc_l[zc_i] += zc_pj;");
  w_.line("zc_p[zc_ty + " + RT + " * zc_i][zc_tx + " + str(kColThreads) + " * zc_j] = zc_pj;");
  w_.close();
  w_.close();
  // 3. V's tile in K's place; the next tile's loads are issued before this one's products.
  w_.line("__syncthreads();");
  put("zc_rv", "zc_kv", kt, at.dv, v_vec);
  w_.open("if (zc_k0 + " + KT + " < zc_end)");
  fetch("zc_rk", at.K, at.ks, b, kt, at.d, "zc_k0 + " + KT, at.tk, k_vec);
  fetch("zc_rv", at.V, at.vs, b, kt, at.dv, "zc_k0 + " + KT, at.tk, v_vec);
  w_.close();
  w_.line("__syncthreads();");
  w_.line("#pragma unroll 4");
  w_.open("for (int zc_kk = 0; zc_kk < " + KT + "; zc_kk += 4)");
  w_.line("float4 zc_pv[" + RPT + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + RPT +
          "; ++zc_i) zc_pv[zc_i] = *reinterpret_cast<const float4*>(&zc_p[zc_ty + " + RT +
          " * zc_i][zc_kk]);");
  const char* lane[] = {"x", "y", "z", "w"};
  for (int u = 0; u < 4; ++u) {
    for (int64_t g = 0; g < groups; ++g) {
      const std::string col = "zc_tx * 4 + " + str(64 * g);
      // Columns past dv (dv not a multiple of 64) are neither read nor kept.
      w_.open(at.dv % 64 == 0 || g + 1 < groups ? "" : "if (" + col + " < " + DV + ")");
      w_.line("const float4 zc_vv = *reinterpret_cast<const float4*>(&zc_kv[zc_kk + " + str(u) +
              "][" + col + "]);");
      w_.line("#pragma unroll");
      w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
      for (int c = 0; c < 4; ++c) {
        w_.line("zc_o[zc_i][" + str(4 * g + c) + "] += zc_pv[zc_i]." + lane[u] + " * zc_vv." +
                lane[c] + ";");
      }
      w_.close();
      w_.close();
    }
  }
  w_.close();
  w_.close();  // key tiles

  const std::string reg = "v" + std::to_string(at.O);
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("float zc_sum = zc_l[zc_i];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_off = " + str(kColThreads / 2) +
          "; zc_off > 0; zc_off /= 2) zc_sum += __shfl_xor_sync(0xffffffffu, zc_sum, zc_off);");
  w_.line("const idx_t zc_q = zc_q0 + zc_ty + " + RT + " * zc_i;");
  w_.open("if (zc_q < " + num(at.tq) + ")");
  w_.line("#pragma unroll");
  w_.open("for (int zc_g = 0; zc_g < " + str(groups) + "; ++zc_g)");
  w_.line("const int zc_d = zc_tx * 4 + zc_g * 64;");
  w_.open("if (zc_d < " + DV + ")");
  // No key at all (an empty Tk) gives zeros, as the eager kernel's empty product does.
  auto value = [&](const std::string& c) {
    return "(zc_sum > 0.f ? zc_o[zc_i][zc_g * 4 + " + c + "] / zc_sum : 0.f)";
  };
  if (o_vec) {
    // The thread's four columns leave in one store.
    const std::string raw = raw_vector_type(4 * dtype_size(at.odt));
    w_.open("if (zc_vec)");
    w_.line("__align__(16) " + storage_type(at.odt) + " zc_oh[4];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < 4; ++zc_c) zc_oh[zc_c] = " +
            to_storage(at.odt, value("zc_c")) + ";");
    w_.line("*reinterpret_cast<" + raw + "*>(&" +
            element_ref(at.O, at.names(at.os, b, "zc_q", "zc_d")) + ") = *reinterpret_cast<const " +
            raw + "*>(zc_oh);");
    w_.close();
    w_.open("else");
  }
  w_.line("#pragma unroll");
  w_.open("for (int zc_c = 0; zc_c < 4; ++zc_c)");
  w_.line("const float " + reg + " = " + value("zc_c") + ";");
  w_.line(store(at.O, at.names(at.os, b, "zc_q", "(zc_d + zc_c)"), reg));
  w_.close();
  if (o_vec) w_.close();
  w_.close();
  w_.close();
  w_.close();
  w_.close();
  w_.close();  // batch items
}

}  // namespace zc::codegen::cuda
