// attention_grad, the tiled form (launch.h's attention_grad_tiling; attention_backward.cpp
// says what the kernels compute): f32 registers, head and value dims that are multiples of 4 up
// to 128, written like the tiled forward (attention_tiled.cpp) as small register-tiled
// matrix products over shared tiles, so that each value read from shared memory feeds several
// multiply-adds.
//
// A block of 128 threads owns R rows of its side and walks the other side in tiles of C rows
// (R and C are 16 or 32: launch.h's attention_grad_tiling). Thread (ty, tx) of the 8 x 16 grid
// takes rows ty + 8i (i < R / 8) and, in the score-like products, the other side's rows
// tx + 16j (j < C / 16); in
// the output products, rows ty + 8i and the columns 4 tx + 64 g + c (c < 4), as the forward's
// output. Tiles are loaded into registers one tile ahead (their memory latency overlaps the
// current tile's arithmetic) and then stored to shared memory.
//   dq (query rows; key tiles):    S = Q K^T and dP = G V^T ([R, C] register tiles), then
//       dS = P (dP - delta) with P = exp(S scale - lse) to a shared [R, C] tile, then
//       dq += dS K. Out: dq * scale.
//   dk, dv (key rows; query tiles, with the queries' lse and delta in registers):
//       S^T = K Q^T, P^T to a shared tile (for dv), dP^T = V G^T and dS^T to a shared tile
//       (for dk), then dv += P^T G and dk += dS^T Q. Out: dk * scale, dv; both side by side for
//       the kv gradient, which forms P once for both.
// Masked entries weigh 0: keys past Tk or after the query (causal) for dq; queries past Tq or
// before the key (causal) for dk and dv, whose sums run over queries. A causal dq block stops
// at the last key its last row sees, a dk/dv block starts at its first key row's query.
#include <algorithm>
#include <string>
#include <vector>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"

namespace zc::codegen::cuda {

using ir::ValueId;

namespace {

constexpr int kColThreads = 16;                               // tx
constexpr int kRowThreads = kAttentionThreads / kColThreads;  // ty

}  // namespace

void KernelEmitter::emit_attention_grad_tiled(const AttentionOperands& at, const Launch& l,
                                              const AttentionGradTiling& t) {
  const bool qside = at.query_side(), want_k = at.wants_k(), want_v = at.wants_v();
  const bool need_ds = at.needs_ds();
  const int64_t R = t.rows, C = t.cols, rpt = R / kRowThreads, cpt = C / kColThreads;
  const std::string RPT = str(rpt), CPT = str(cpt), RT = str(kRowThreads), CTH = str(kColThreads);
  const std::string scale = literal(at.a.scale, DType::f32);
  const ValueId LSE = at.LSE, DELTA = at.DELTA;
  const Shape& lse_shape = s_.graph.meta(LSE).shape;
  const Shape& delta_shape = s_.graph.meta(DELTA).shape;

  // The tiles: the block's own rows (persistent) and the other side's (one per step).
  //   qside: own Q, G; other K, V.   else: own K, V; other Q, G.
  const ValueId own_a = qside ? at.Q : at.K, own_c = qside ? at.G : at.V;
  const ValueId oth_a = qside ? at.K : at.Q, oth_c = qside ? at.V : at.G;
  const AttentionTile own_at = attention_tile(own_a, R, at.d);
  const AttentionTile own_ct = need_ds ? attention_tile(own_c, R, at.dv) : AttentionTile{};
  const AttentionTile oth_at = attention_tile(oth_a, C, at.d);
  const AttentionTile oth_ct = attention_tile(oth_c, C, at.dv);
  const int64_t own_rows = qside ? at.tq : at.tk, oth_rows = qside ? at.tk : at.tq;
  const bool o_vec = quad_stores(at.O);

  const int64_t sd = AttentionTile::stride(at.d), sv = AttentionTile::stride(at.dv),
                sp = AttentionTile::stride(C);
  w_.line("__shared__ __align__(16) float zc_oa[" + str(R) + "][" + str(sd) + "];");
  if (need_ds) w_.line("__shared__ __align__(16) float zc_oc[" + str(R) + "][" + str(sv) + "];");
  w_.line("__shared__ __align__(16) float zc_ta[" + str(C) + "][" + str(sd) + "];");
  w_.line("__shared__ __align__(16) float zc_tc[" + str(C) + "][" + str(sv) + "];");
  if (need_ds) w_.line("__shared__ __align__(16) float zc_ds[" + str(R) + "][" + str(sp) + "];");
  if (want_v) w_.line("__shared__ __align__(16) float zc_ps[" + str(R) + "][" + str(sp) + "];");
  w_.line("const int zc_tx = threadIdx.x % " + CTH + ", zc_ty = threadIdx.x / " + CTH + ";");
  w_.line("const idx_t zc_r0 = (idx_t)blockIdx.x * " + str(R) + ";");
  // The other side's rows this block's rows see: for dq the keys up to (causal) its last row;
  // for dk and dv the queries from (causal) its first row on.
  if (qside) {
    w_.line("const idx_t zc_start = 0, zc_end = " +
            (at.a.causal ? "min((idx_t)" + num(at.tk) + ", zc_r0 + " + str(R) + ")" : num(at.tk)) +
            ";");
  } else {
    w_.line("const idx_t zc_start = " + std::string(at.a.causal ? "zc_r0" : "0") +
            ", zc_end = " + num(at.tq) + ";");
  }
  std::vector<ValueId> checked;
  for (const AttentionTile* tile : {&own_at, &own_ct, &oth_at, &oth_ct}) {
    if (tile->vec > 1) checked.push_back(tile->src);
  }
  if (o_vec) checked.push_back(at.O);
  declare_vector_check(checked);

  w_.open("for (idx_t zc_z = blockIdx.y; zc_z < " + num(l.grid_y) + "; zc_z += gridDim.y)");
  Names b = decompose(at.batch, "zc_z", "zb");
  // lse and delta of the other side's (query) rows, loaded a tile ahead with them (dk, dv).
  auto fetch_other = [&](const std::string& first) {
    fetch_tile(at, oth_at, "zc_ra", b, first, oth_rows);
    fetch_tile(at, oth_ct, "zc_rc", b, first, oth_rows);
    if (qside) return;
    w_.line("#pragma unroll");
    w_.open("for (int zc_j = 0; zc_j < " + CPT + "; ++zc_j)");
    w_.line("const idx_t zc_q = " + first + " + zc_tx + " + CTH + " * zc_j;");
    w_.line("zc_rl[zc_j] = zc_q < " + num(at.tq) + " ? (float)" +
            load(LSE, at.row_names(lse_shape, b, "zc_q")) + " : 0.f;");
    if (need_ds) {
      w_.line("zc_rd[zc_j] = zc_q < " + num(at.tq) + " ? (float)" +
              load(DELTA, at.row_names(delta_shape, b, "zc_q")) + " : 0.f;");
    }
    w_.close();
  };
  w_.line("float zc_roa[" + str(own_at.registers()) + "]" +
          (need_ds ? ", zc_roc[" + str(own_ct.registers()) + "]" : "") + ", zc_ra[" +
          str(oth_at.registers()) + "], zc_rc[" + str(oth_ct.registers()) + "];");
  if (!qside) w_.line("float zc_rl[" + CPT + "], zc_rd[" + CPT + "];");
  fetch_tile(at, own_at, "zc_roa", b, "zc_r0", own_rows);
  if (need_ds) fetch_tile(at, own_ct, "zc_roc", b, "zc_r0", own_rows);
  w_.open("if (zc_start < zc_end)");
  fetch_other("zc_start");
  w_.close();
  if (qside) {
    // The rows' own lse and delta; rows past Tq take zeros (nothing of theirs is stored).
    w_.line("float zc_lse[" + RPT + "], zc_dl[" + RPT + "];");
    w_.line("#pragma unroll");
    w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
    w_.line("const idx_t zc_q = zc_r0 + zc_ty + " + RT + " * zc_i;");
    w_.line("zc_lse[zc_i] = zc_q < " + num(at.tq) + " ? (float)" +
            load(LSE, at.row_names(lse_shape, b, "zc_q")) + " : 0.f;");
    w_.line("zc_dl[zc_i] = zc_q < " + num(at.tq) + " ? (float)" +
            load(DELTA, at.row_names(delta_shape, b, "zc_q")) + " : 0.f;");
    w_.close();
  }
  // The previous batch item's readers of the own tiles are past the barriers of its last step.
  w_.line("__syncthreads();");
  put_tile(own_at, "zc_roa", "zc_oa");
  if (need_ds) put_tile(own_ct, "zc_roc", "zc_oc");
  // Accumulators: "a" is dq or dk (d columns), "c" is dv (dv columns).
  const int64_t ga = (at.d + 63) / 64, gc = (at.dv + 63) / 64;
  if (need_ds) w_.line("float zc_acc_a[" + RPT + "][" + str(4 * ga) + "];");
  if (want_v) w_.line("float zc_acc_c[" + RPT + "][" + str(4 * gc) + "];");
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  if (need_ds) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_n = 0; zc_n < " + str(4 * ga) + "; ++zc_n) zc_acc_a[zc_i][zc_n] = 0.f;");
  }
  if (want_v) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_n = 0; zc_n < " + str(4 * gc) + "; ++zc_n) zc_acc_c[zc_i][zc_n] = 0.f;");
  }
  w_.close();

  // out[i][j] = sum over `width` of own[ty + 8i][.] * other[tx + 16j][.]: float4 reads of both
  // (the own row's the same across a row's threads, a broadcast).
  auto scores = [&](const std::string& out, const std::string& own, const std::string& other,
                    int64_t width) {
    w_.line("float " + out + "[" + RPT + "][" + CPT + "];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
    w_.line("  for (int zc_j = 0; zc_j < " + CPT + "; ++zc_j) " + out + "[zc_i][zc_j] = 0.f;");
    w_.line("#pragma unroll");
    w_.open("for (int zc_dd = 0; zc_dd < " + str(width) + "; zc_dd += 4)");
    w_.line("float4 zc_x4[" + RPT + "], zc_y4[" + CPT + "];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_i = 0; zc_i < " + RPT +
            "; ++zc_i) zc_x4[zc_i] = *reinterpret_cast<const " + "float4*>(&" + own + "[zc_ty + " +
            RT + " * zc_i][zc_dd]);");
    w_.line("#pragma unroll");
    w_.line("for (int zc_j = 0; zc_j < " + CPT +
            "; ++zc_j) zc_y4[zc_j] = *reinterpret_cast<const " + "float4*>(&" + other +
            "[zc_tx + " + CTH + " * zc_j][zc_dd]);");
    w_.line("#pragma unroll");
    w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
    w_.line("#pragma unroll");
    w_.open("for (int zc_j = 0; zc_j < " + CPT + "; ++zc_j)");
    for (const char* c : {"x", "y", "z", "w"}) {
      w_.line(out + "[zc_i][zc_j] += zc_x4[zc_i]." + c + " * zc_y4[zc_j]." + c + ";");
    }
    w_.close();
    w_.close();
    w_.close();
  };
  // acc[i][4g + c] += sum over the tile's C rows n of weights[ty + 8i][n] * rows[n][4tx + 64g + c].
  auto accumulate = [&](const std::string& acc, const std::string& weights, const std::string& rows,
                        int64_t width, int64_t groups) {
    w_.line("#pragma unroll 4");
    w_.open("for (int zc_n = 0; zc_n < " + str(C) + "; zc_n += 4)");
    w_.line("float4 zc_w4[" + RPT + "];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_i = 0; zc_i < " + RPT +
            "; ++zc_i) zc_w4[zc_i] = *reinterpret_cast<const " + "float4*>(&" + weights +
            "[zc_ty + " + RT + " * zc_i][zc_n]);");
    const char* lane[] = {"x", "y", "z", "w"};
    for (int u = 0; u < 4; ++u) {
      for (int64_t g = 0; g < groups; ++g) {
        const std::string col = "zc_tx * 4 + " + str(64 * g);
        // Columns past the width (not a multiple of 64) are neither read nor kept.
        w_.open(width % 64 == 0 || g + 1 < groups ? "" : "if (" + col + " < " + str(width) + ")");
        w_.line("const float4 zc_r4 = *reinterpret_cast<const float4*>(&" + rows + "[zc_n + " +
                str(u) + "][" + col + "]);");
        w_.line("#pragma unroll");
        w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
        for (int c = 0; c < 4; ++c) {
          w_.line(acc + "[zc_i][" + str(4 * g + c) + "] += zc_w4[zc_i]." + lane[u] + " * zc_r4." +
                  lane[c] + ";");
        }
        w_.close();
        w_.close();
      }
    }
    w_.close();
  };

  w_.open("for (idx_t zc_c0 = zc_start; zc_c0 < zc_end; zc_c0 += " + str(C) + ")");
  // Everyone is done with the last tile (and, the first time, the own tiles are written).
  w_.line("__syncthreads();");
  put_tile(oth_at, "zc_ra", "zc_ta");
  put_tile(oth_ct, "zc_rc", "zc_tc");
  if (!qside) {
    w_.line("float zc_cl[" + CPT + "], zc_cd[" + CPT + "];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_j = 0; zc_j < " + CPT + "; ++zc_j) { zc_cl[zc_j] = zc_rl[zc_j]; " +
            (need_ds ? "zc_cd[zc_j] = zc_rd[zc_j]; " : "") + "}");
  }
  w_.line("__syncthreads();");
  // The next tile's loads fly while this one is used.
  w_.open("if (zc_c0 + " + str(C) + " < zc_end)");
  fetch_other("zc_c0 + " + str(C));
  w_.close();
  scores("zc_s", "zc_oa", "zc_ta", at.d);
  if (need_ds) scores("zc_dp", "zc_oc", "zc_tc", at.dv);
  // P (0 where masked) and dS, to the shared tiles the output products read.
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("const idx_t zc_r = zc_r0 + zc_ty + " + RT + " * zc_i;");
  w_.line("#pragma unroll");
  w_.open("for (int zc_j = 0; zc_j < " + CPT + "; ++zc_j)");
  w_.line("const idx_t zc_col = zc_c0 + zc_tx + " + CTH + " * zc_j;");
  std::string visible = "zc_col < zc_end";
  if (at.a.causal) visible += qside ? " && zc_col <= zc_r" : " && zc_r <= zc_col";
  const std::string lse = qside ? "zc_lse[zc_i]" : "zc_cl[zc_j]";
  const std::string delta = qside ? "zc_dl[zc_i]" : "zc_cd[zc_j]";
  w_.line("const float zc_p = " + visible + " ? zc_exp(zc_s[zc_i][zc_j] * " + scale + " - " + lse +
          ") : 0.f;");
  const std::string cell = "[zc_ty + " + RT + " * zc_i][zc_tx + " + CTH + " * zc_j]";
  if (want_v) w_.line("zc_ps" + cell + " = zc_p;");
  if (need_ds) w_.line("zc_ds" + cell + " = zc_p * (zc_dp[zc_i][zc_j] - " + delta + ");");
  w_.close();
  w_.close();
  w_.line("__syncthreads();");
  // dq += dS K, or dk += dS^T Q; dv += P^T G.
  if (need_ds) accumulate("zc_acc_a", "zc_ds", "zc_ta", at.d, ga);
  if (want_v) accumulate("zc_acc_c", "zc_ps", "zc_tc", at.dv, gc);
  w_.close();  // tiles

  // Out: dq or dk times the scale, dv as it is; with both, dk's columns first.
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + RPT + "; ++zc_i)");
  w_.line("const idx_t zc_r = zc_r0 + zc_ty + " + RT + " * zc_i;");
  w_.open("if (zc_r < " + num(own_rows) + ")");
  auto store_part = [&](const std::string& acc, int64_t width, int64_t groups, int64_t shift,
                        bool scaled) {
    w_.line("#pragma unroll");
    w_.open("for (int zc_g = 0; zc_g < " + str(groups) + "; ++zc_g)");
    w_.line("const int zc_d = zc_tx * 4 + zc_g * 64;");
    w_.open("if (zc_d < " + str(width) + ")");
    store_quad(at, b, "zc_r", shift ? "(zc_d + " + str(shift) + ")" : "zc_d", o_vec,
               [&](const std::string& c) {
                 return acc + "[zc_i][zc_g * 4 + " + c + "]" + (scaled ? " * " + scale : "");
               });
    w_.close();
    w_.close();
  };
  if (need_ds) store_part("zc_acc_a", at.d, ga, 0, true);
  if (want_v) store_part("zc_acc_c", at.dv, gc, want_k ? at.d : 0, false);
  w_.close();
  w_.close();
  w_.close();  // batch items
}

}  // namespace zc::codegen::cuda
