// attention_grad as one kernel per gradient (ops/attention_grad.cpp says what it computes): dq,
// or dk, dv or both side by side, from q, k, v, the output's gradient g, and per query row the
// log-sum-exp of its scores (lse) and delta = sum(g * o). No [Tq, Tk] matrix is in memory:
// each score is recomputed, turned into its probability P = exp(S * scale - lse) (masked
// scores weigh 0), and used at once:
//   dq: a block owns query rows and walks the keys (K and V tiles in shared memory):
//       dP = g . v_j, dS = P (dP - delta), dq += dS k_j; dq * scale out.
//   dk, dv: a block owns key rows and walks the queries (Q and G tiles, with their lse and
//       delta): dv += P g_i; dP = v . g_i, dS = P (dP - delta_i), dk += dS q_i; dk * scale out.
// Every output element is summed by one thread in a fixed order: no atomics, and the same
// bits on every run. A causal block walks only the tiles its rows see: for dq, the keys up to
// its last query row; for dk and dv, the queries from its first key row on.
//
// Two forms, as the forward's (launch.h's attention_grad_tiling): the tiled form
// (attention_backward_tiled.cpp) for f32 compute and head dims that are multiples of 4
// up to 128, and this file's rows form for the rest (f64, odd head dims, dims above 128). In
// the rows form `threads_per_row` threads share a row: thread j holds the dims
// g * W * TPR + j * W + c (c < W) of the row's operands and gradients in registers, as the
// forward's rows form does (W = 4 with float4 reads of the tile when f32 dims allow, else 1).
// The other side's rows are taken four at a time: each thread's partial dot products are summed
// across the row's threads with shuffles, so every thread of a row holds the four scores (and
// dP), and then adds its dims' share of the products. Loops have block-uniform bounds, since
// the shuffles need the whole warp: rows past the end compute on zeros and store nothing.
#include <algorithm>
#include <functional>
#include <string>
#include <tuple>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"

namespace zc::codegen::cuda {

using ir::ValueId;

namespace {

constexpr int kStep = 4;  // other-side rows per step

}  // namespace

void KernelEmitter::emit_attention_grad_rows(const AttentionOperands& at, const Launch& l,
                                             const AttentionGradTiling& t) {
  const DType cdt = ops::compute_dtype(at.odt);
  const std::string T = compute_type(at.odt);
  // The side a block's rows are on: query rows for dq, key rows for dk and dv. "a" is the row
  // operand that meets the other side's "A" in the scores (q and K, or k and Q); "c" the one
  // that meets "C" in dP (g and V, or v and G).
  const bool qside = at.query_side(), want_k = at.wants_k(), want_v = at.wants_v();
  const bool need_ds = at.needs_ds();
  const ValueId a_row = qside ? at.Q : at.K, c_row = qside ? at.G : at.V;
  const ValueId a_tile = qside ? at.K : at.Q, c_tile = qside ? at.V : at.G;
  const Shape& a_row_shape = qside ? at.qs : at.ks;
  const Shape& c_row_shape = qside ? at.gs : at.vs;
  const Shape& a_tile_shape = qside ? at.ks : at.qs;
  const Shape& c_tile_shape = qside ? at.vs : at.gs;
  const int64_t rows_total = qside ? at.tq : at.tk, cols_total = qside ? at.tk : at.tq;

  const int tpr = t.threads_per_row;
  const int w = cdt == DType::f32 && at.d % (4 * tpr) == 0 && at.dv % (4 * tpr) == 0 ? 4 : 1;
  const int64_t dpt = (at.d + tpr - 1) / tpr, dvpt = (at.dv + tpr - 1) / tpr;  // dims per thread
  // Column tile: as many of the other side's rows as fit their two operands (and, for dk and
  // dv, their lse and delta) in 32 KiB of shared memory, 8 to 64.
  const int64_t bytes_per_col = (at.d + at.dv + 2) * static_cast<int64_t>(dtype_size(cdt));
  int64_t ct = 64;
  while (ct > 8 && ct * bytes_per_col > 32768) ct /= 2;
  const std::string D = str(at.d), DV = str(at.dv), CT = str(ct), TPR = str(tpr), W = str(w);
  const std::string ROWS = str(t.rows), U = str(kStep);
  const std::string scale = literal(at.a.scale, cdt);
  // The head dim of element i (< dims per thread) of this thread.
  const std::string dim =
      "(zc_i / " + W + ") * " + str(w * tpr) + " + zc_j * " + W + " + zc_i % " + W;
  // Calls `body` with the expression of tile row `row`'s element i of this thread, inside a
  // loop over i; with float4 reads, one vector per group of four.
  auto for_each_dim = [&](const std::string& tile, int64_t per_thread, const std::string& row,
                          const std::string& limit, const std::function<void(std::string)>& body) {
    w_.line("#pragma unroll");
    if (w == 4) {
      w_.open("for (int zc_g = 0; zc_g < " + str(per_thread / 4) + "; ++zc_g)");
      w_.line("const float4 zc_t = *reinterpret_cast<const float4*>(&" + tile + "[" + row +
              "][zc_g * " + str(4 * tpr) + " + zc_j * 4]);");
      const char* lane[] = {"x", "y", "z", "w"};
      for (int c = 0; c < 4; ++c) {
        w_.open("");
        w_.line("const int zc_i = zc_g * 4 + " + str(c) + ";");
        body(std::string("zc_t.") + lane[c]);
        w_.close();
      }
      w_.close();
    } else {
      w_.open("for (int zc_i = 0; zc_i < " + str(per_thread) + "; ++zc_i)");
      w_.line("const int zc_d = " + dim + ";");
      w_.open("if (zc_d < " + limit + ")");
      body(tile + "[" + row + "][zc_d]");
      w_.close();
      w_.close();
    }
  };
  // This thread's dims of row operand `u` (width `width`, `per_thread` of them) into `regs`.
  auto load_row = [&](const std::string& regs, ValueId u, const Shape& shape, const Names& b,
                      int64_t per_thread, const std::string& width) {
    w_.line("#pragma unroll");
    w_.open("for (int zc_i = 0; zc_i < " + str(per_thread) + "; ++zc_i)");
    w_.line("const int zc_d = " + dim + ";");
    w_.line(regs + "[zc_i] = zc_live && zc_d < " + width + " ? (" + T + ")" +
            load(u, at.names(shape, b, "zc_r", "zc_d")) + " : (" + T + ")0;");
    w_.close();
  };

  w_.line("__shared__ __align__(16) " + T + " zc_a[" + CT + "][" + D + "];");
  w_.line("__shared__ __align__(16) " + T + " zc_c[" + CT + "][" + DV + "];");
  if (!qside) {
    w_.line("__shared__ " + T + " zc_ls[" + CT + "];");
    if (need_ds) w_.line("__shared__ " + T + " zc_dl[" + CT + "];");
  }
  w_.line("const int zc_j = threadIdx.x % " + TPR + ";");
  w_.line("const idx_t zc_r = (idx_t)blockIdx.x * " + ROWS + " + threadIdx.x / " + TPR + ";");
  w_.line("const bool zc_live = zc_r < " + num(rows_total) + ";");
  // The other side's rows this block's rows see: for dq the keys up to (causal) its last row;
  // for dk and dv the queries from (causal) its first row on.
  if (qside) {
    std::string end = num(at.tk);
    if (at.a.causal) end = "min((idx_t)" + end + ", ((idx_t)blockIdx.x + 1) * " + ROWS + ")";
    w_.line("const idx_t zc_start = 0, zc_end = " + end + ";");
  } else {
    w_.line(
        "const idx_t zc_start = " + std::string(at.a.causal ? "(idx_t)blockIdx.x * " + ROWS : "0") +
        ", zc_end = " + num(at.tq) + ";");
  }
  w_.open("for (idx_t zc_z = blockIdx.y; zc_z < " + num(l.grid_y) + "; zc_z += gridDim.y)");
  Names b = decompose(at.batch, "zc_z", "zb");
  w_.line(T + " a[" + str(dpt) + "]" + (need_ds ? ", c[" + str(dvpt) + "]" : "") +
          (need_ds ? ", acc_a[" + str(dpt) + "]" : "") +
          (want_v ? ", acc_c[" + str(dvpt) + "]" : "") + ";");
  load_row("a", a_row, a_row_shape, b, dpt, D);
  if (need_ds) load_row("c", c_row, c_row_shape, b, dvpt, DV);
  if (need_ds) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_i = 0; zc_i < " + str(dpt) + "; ++zc_i) acc_a[zc_i] = 0;");
  }
  if (want_v) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_i = 0; zc_i < " + str(dvpt) + "; ++zc_i) acc_c[zc_i] = 0;");
  }
  if (qside) {
    // The row's own lse and delta; rows past the end take zeros (nothing of theirs is stored).
    w_.line("const " + T + " zc_lse = zc_live ? (" + T + ")" +
            load(at.LSE, at.row_names(s_.graph.meta(at.LSE).shape, b, "zc_r")) + " : (" + T +
            ")0;");
    w_.line("const " + T + " zc_delta = zc_live ? (" + T + ")" +
            load(at.DELTA, at.row_names(s_.graph.meta(at.DELTA).shape, b, "zc_r")) + " : (" + T +
            ")0;");
  }

  w_.open("for (idx_t zc_c0 = zc_start; zc_c0 < zc_end; zc_c0 += " + CT + ")");
  // Everyone is done with the last tile.
  w_.line("__syncthreads();");
  for (auto [tile, src, shape, width] : {std::tuple{"zc_a", a_tile, a_tile_shape, D},
                                         std::tuple{"zc_c", c_tile, c_tile_shape, DV}}) {
    // A constant trip count, unrolled: each thread has several loads in flight, not one.
    const int64_t elements = ct * std::stoll(width);
    w_.line("#pragma unroll 8");
    w_.open("for (int zc_n = 0; zc_n < " +
            str((elements + kAttentionThreads - 1) / kAttentionThreads) + "; ++zc_n)");
    w_.line("const int zc_e = zc_n * " + str(kAttentionThreads) + " + threadIdx.x;");
    if (elements % kAttentionThreads != 0) w_.line("if (zc_e >= " + str(elements) + ") break;");
    w_.line("const int zc_cc = zc_e / " + width + ", zc_d = zc_e % " + width + ";");
    w_.line("const idx_t zc_col = zc_c0 + zc_cc;");
    w_.line(std::string(tile) + "[zc_cc][zc_d] = zc_col < " + num(cols_total) + " ? (" + T + ")" +
            load(src, at.names(shape, b, "zc_col", "zc_d")) + " : (" + T + ")0;");
    w_.close();
  }
  if (!qside) {
    // The queries' lse and delta (ct <= 64 < the block's threads).
    w_.open("if (threadIdx.x < " + CT + ")");
    w_.line("const idx_t zc_col = zc_c0 + threadIdx.x;");
    w_.line("zc_ls[threadIdx.x] = zc_col < " + num(at.tq) + " ? (" + T + ")" +
            load(at.LSE, at.row_names(s_.graph.meta(at.LSE).shape, b, "zc_col")) + " : (" + T +
            ")0;");
    if (need_ds) {
      w_.line("zc_dl[threadIdx.x] = zc_col < " + num(at.tq) + " ? (" + T + ")" +
              load(at.DELTA, at.row_names(s_.graph.meta(at.DELTA).shape, b, "zc_col")) + " : (" +
              T + ")0;");
    }
    w_.close();
  }
  w_.line("__syncthreads();");
  // Block-uniform bounds: every thread takes the same steps.
  w_.open("for (int zc_cc = 0; zc_cc < " + CT + " && zc_c0 + zc_cc < zc_end; zc_cc += " + U + ")");
  w_.line(T + " s[" + U + "]" + (need_ds ? ", dp[" + U + "]" : "") + ";");
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + U + "; ++zc_u)");
  w_.line("s[zc_u] = 0;");
  for_each_dim("zc_a", dpt, "zc_cc + zc_u", D,
               [&](const std::string& e) { w_.line("s[zc_u] += a[zc_i] * " + e + ";"); });
  if (need_ds) {
    w_.line("dp[zc_u] = 0;");
    for_each_dim("zc_c", dvpt, "zc_cc + zc_u", DV,
                 [&](const std::string& e) { w_.line("dp[zc_u] += c[zc_i] * " + e + ";"); });
  }
  w_.close();
  w_.line("#pragma unroll");
  w_.open("for (int zc_o = " + str(tpr / 2) + "; zc_o > 0; zc_o /= 2)");
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + U + "; ++zc_u)");
  w_.line("s[zc_u] += __shfl_xor_sync(0xffffffffu, s[zc_u], zc_o);");
  if (need_ds) w_.line("dp[zc_u] += __shfl_xor_sync(0xffffffffu, dp[zc_u], zc_o);");
  w_.close();
  w_.close();
  // P (0 where masked) and dS, per other-side row u.
  w_.line(T + " p[" + U + "]" + (need_ds ? ", ds[" + U + "]" : "") + ";");
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + U + "; ++zc_u)");
  w_.line("const idx_t zc_col = zc_c0 + zc_cc + zc_u;");
  // qside: zc_col is a key (zc_end already stops at Tk); else zc_col is a query.
  std::string visible = "zc_col < zc_end";
  if (at.a.causal) visible += qside ? " && zc_col <= zc_r" : " && zc_r <= zc_col";
  const std::string lse = qside ? "zc_lse" : "zc_ls[zc_cc + zc_u]";
  const std::string delta = qside ? "zc_delta" : "zc_dl[zc_cc + zc_u]";
  w_.line("p[zc_u] = " + visible + " ? zc_exp(s[zc_u] * " + scale + " - " + lse + ") : (" + T +
          ")0;");
  if (need_ds) w_.line("ds[zc_u] = p[zc_u] * (dp[zc_u] - " + delta + ");");
  w_.close();
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + U + "; ++zc_u)");
  if (need_ds) {
    // dq += dS k_j (qside) or dk += dS q_i.
    for_each_dim("zc_a", dpt, "zc_cc + zc_u", D,
                 [&](const std::string& e) { w_.line("acc_a[zc_i] += ds[zc_u] * " + e + ";"); });
  }
  if (want_v) {
    for_each_dim("zc_c", dvpt, "zc_cc + zc_u", DV,
                 [&](const std::string& e) { w_.line("acc_c[zc_i] += p[zc_u] * " + e + ";"); });
  }
  w_.close();
  w_.close();  // steps
  w_.close();  // tiles

  // Out: dq or dk times the scale, dv as it is; with both, dk's columns first.
  w_.open("if (zc_live)");
  const std::string reg = "v" + std::to_string(at.O);
  auto store_part = [&](const std::string& acc, int64_t per_thread, const std::string& width,
                        int64_t shift, bool scaled) {
    w_.line("#pragma unroll");
    w_.open("for (int zc_i = 0; zc_i < " + str(per_thread) + "; ++zc_i)");
    w_.line("const int zc_d = " + dim + ";");
    w_.open("if (zc_d < " + width + ")");
    w_.line(T + " " + reg + " = " + acc + "[zc_i]" + (scaled ? " * " + scale : "") + ";");
    w_.line(store(at.O, at.names(at.os, b, "zc_r", shift ? "(zc_d + " + str(shift) + ")" : "zc_d"),
                  reg));
    w_.close();
    w_.close();
  };
  if (need_ds) store_part("acc_a", dpt, D, 0, true);
  if (want_v) store_part("acc_c", dvpt, DV, want_k ? at.d : 0, false);
  w_.close();
  w_.close();  // batch items
}

}  // namespace zc::codegen::cuda
