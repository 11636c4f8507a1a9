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
//
// attention_lse (the log-sum-exp of each query row's scores, for the backward) is the same
// kernel without V: steps 1 and 2 (no probability tile), and each row's max + log(sum) out.
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

}  // namespace

void KernelEmitter::emit_attention_tiled(const AttentionOperands& at, const Launch& l,
                                         const AttentionTiling& t) {
  // attention_lse: no V, no output product; a row's result is its max + log(sum).
  const bool lse = at.op == ops::OpId::attention_lse;
  const int64_t kt = t.keys, kpt = kt / kColThreads, groups = (at.dv + 63) / 64;
  const int64_t q_stride = AttentionTile::stride(at.d),
                kv_stride = AttentionTile::stride(std::max(at.d, at.dv));
  const int64_t p_stride = AttentionTile::stride(kt);
  const std::string RPT = str(kRowsPerThread), KPT = str(kpt), RT = str(kRowThreads);
  const std::string D = str(at.d), DV = str(at.dv), KT = str(kt), BQ = str(kAttentionTileRows);
  const std::string scale = literal(at.a.scale, DType::f32);

  const AttentionTile qt = attention_tile(at.Q, kAttentionTileRows, at.d),
                      ktile = attention_tile(at.K, kt, at.d);
  const AttentionTile vt = lse ? AttentionTile{} : attention_tile(at.V, kt, at.dv);

  w_.line("__shared__ __align__(16) float zc_qs[" + BQ + "][" + str(q_stride) + "];");
  w_.line("__shared__ __align__(16) float zc_kv[" + KT + "][" + str(kv_stride) + "];");
  if (!lse) w_.line("__shared__ __align__(16) float zc_p[" + BQ + "][" + str(p_stride) + "];");
  w_.line("const int zc_tx = threadIdx.x % " + str(kColThreads) + ", zc_ty = threadIdx.x / " +
          str(kColThreads) + ";");
  w_.line("const idx_t zc_q0 = (idx_t)blockIdx.x * " + BQ + ";");
  // The keys this block's rows see: all, or (causal) up to its last row.
  w_.line("const idx_t zc_end = " +
          (at.a.causal ? "min((idx_t)" + num(at.tk) + ", zc_q0 + " + BQ + ")" : num(at.tk)) + ";");
  // Whether the operands read with vector loads, and the output, start on 16-byte boundaries.
  // The output's groups of four columns can leave in one store when its layout allows.
  const bool o_vec = !lse && quad_stores(at.O);
  std::vector<ValueId> checked;
  for (const AttentionTile* tile : {&qt, &ktile, &vt}) {
    if (tile->vec > 1) checked.push_back(tile->src);
  }
  if (o_vec) checked.push_back(at.O);
  declare_vector_check(checked);
  w_.open("for (idx_t zc_z = blockIdx.y; zc_z < " + num(l.grid_y) + "; zc_z += gridDim.y)");
  Names b = decompose(at.batch, "zc_z", "zb");
  // The query tile and the first key and value tiles are loaded together.
  w_.line("float zc_rq[" + str(qt.registers()) + "], zc_rk[" + str(ktile.registers()) + "]" +
          (lse ? "" : ", zc_rv[" + str(vt.registers()) + "]") + ";");
  fetch_tile(at, qt, "zc_rq", b, "zc_q0", at.tq);
  w_.open("if (zc_end > 0)");
  fetch_tile(at, ktile, "zc_rk", b, "(idx_t)0", at.tk);
  if (!lse) fetch_tile(at, vt, "zc_rv", b, "(idx_t)0", at.tk);
  w_.close();
  // The previous batch item's readers of the query tile are past the barriers of its last tile.
  w_.line("__syncthreads();");
  put_tile(qt, "zc_rq", "zc_qs");
  w_.line("float zc_m[" + RPT + "], zc_l[" + RPT + "]" +
          (lse ? "" : ", zc_o[" + RPT + "][" + str(4 * groups) + "]") + ";");
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("zc_m[zc_i] = -INFINITY;");
  w_.line("zc_l[zc_i] = 0.f;");
  if (!lse) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(4 * groups) + "; ++zc_c) zc_o[zc_i][zc_c] = 0.f;");
  }
  w_.close();

  w_.open("for (idx_t zc_k0 = 0; zc_k0 < zc_end; zc_k0 += " + KT + ")");
  // Everyone is done with the last tile's V (and, the first time, the query tile is written).
  w_.line("__syncthreads();");
  put_tile(ktile, "zc_rk", "zc_kv");
  w_.line("__syncthreads();");
  if (lse) {
    // The next key tile's loads fly while this one's scores are computed.
    w_.open("if (zc_k0 + " + KT + " < zc_end)");
    fetch_tile(at, ktile, "zc_rk", b, "zc_k0 + " + KT, at.tk);
    w_.close();
  }
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
  if (!lse) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(4 * groups) +
            "; ++zc_c) zc_o[zc_i][zc_c] *= zc_corr;");
  }
  w_.line("#pragma unroll");
  w_.open("for (int zc_j = 0; zc_j < " + KPT + "; ++zc_j)");
  w_.line(
      "const float zc_pj = zc_s[zc_i][zc_j] == -INFINITY ? 0.f : zc_exp(zc_s[zc_i][zc_j] - "
      "zc_mn);");
  w_.line("zc_l[zc_i] += zc_pj;");
  if (!lse) {
    w_.line("zc_p[zc_ty + " + RT + " * zc_i][zc_tx + " + str(kColThreads) + " * zc_j] = zc_pj;");
  }
  w_.close();
  w_.close();
  if (!lse) {
    // 3. V's tile in K's place; the next tile's loads are issued before this one's products.
    w_.line("__syncthreads();");
    put_tile(vt, "zc_rv", "zc_kv");
    w_.open("if (zc_k0 + " + KT + " < zc_end)");
    fetch_tile(at, ktile, "zc_rk", b, "zc_k0 + " + KT, at.tk);
    fetch_tile(at, vt, "zc_rv", b, "zc_k0 + " + KT, at.tk);
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
  }
  w_.close();  // key tiles

  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("float zc_sum = zc_l[zc_i];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_off = " + str(kColThreads / 2) +
          "; zc_off > 0; zc_off /= 2) zc_sum += __shfl_xor_sync(0xffffffffu, zc_sum, zc_off);");
  w_.line("const idx_t zc_q = zc_q0 + zc_ty + " + RT + " * zc_i;");
  if (lse) {
    // Every thread of a row holds its maximum and, now, its whole sum; one writes. A row that
    // saw no key (an empty Tk) is -inf, as the eager kernel's.
    const std::string reg = "v" + std::to_string(at.O);
    w_.open("if (zc_tx == 0 && zc_q < " + num(at.tq) + ")");
    w_.line("const float " + reg + " = zc_sum > 0.f ? zc_m[zc_i] + zc_log(zc_sum) : -INFINITY;");
    w_.line(store(at.O, at.row_names(at.os, b, "zc_q"), reg));
    w_.close();
    w_.close();
    w_.close();  // batch items
    return;
  }
  w_.open("if (zc_q < " + num(at.tq) + ")");
  w_.line("#pragma unroll");
  w_.open("for (int zc_g = 0; zc_g < " + str(groups) + "; ++zc_g)");
  w_.line("const int zc_d = zc_tx * 4 + zc_g * 64;");
  w_.open("if (zc_d < " + DV + ")");
  // No key at all (an empty Tk) gives zeros, as the eager kernel's empty product does.
  store_quad(at, b, "zc_q", "zc_d", o_vec, [&](const std::string& c) {
    return "(zc_sum > 0.f ? zc_o[zc_i][zc_g * 4 + " + c + "] / zc_sum : 0.f)";
  });
  w_.close();
  w_.close();
  w_.close();
  w_.close();
  w_.close();  // batch items
}

}  // namespace zc::codegen::cuda
