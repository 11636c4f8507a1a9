// Attention as one kernel: softmax(q k^T * scale [causal]) v without the [Tq, Tk] scores in
// memory. This is the "rows" form (launch.h's attention_tiling), for what the tiled form
// (attention_tiled.cpp) does not take: f64, head dims that are not a multiple of 4 or
// exceed 128. A block takes `rows` query rows of one batch item;
// the `threads_per_row` threads of a row split its head dims, each holding its share of the
// query and of the output accumulator in registers. The block stages tiles of K and V through
// shared memory; keys are taken four at a time: each thread's partial dot products are summed
// across the row's threads with shuffles, and the online softmax (a running maximum and sum,
// rescaling the accumulator when the maximum grows) is updated once per four keys. A causal
// block stops at the last key its last row sees, and every thread of the block runs the same
// number of key steps (the shuffles need the whole warp). Scores are scaled after the dot
// product; sums are in the compute type.
//
// Thread j of a row owns the dims g * W * TPR + j * W + c (c < W): with W = 4 (f32, dims a
// multiple of 4 * TPR) it reads a float4 from the tile per group, the row's threads reading
// consecutive 16 bytes (no bank conflicts; the rows of a warp read the same, a broadcast).
//
// attention_lse (each query row's log-sum-exp of scores, for the backward) is the same kernel
// without V: the online maximum and sum, and max + log(sum) out.
#include <algorithm>
#include <functional>
#include <tuple>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"

namespace zc::codegen::cuda {

using ir::ValueId;

namespace {

constexpr int kKeysPerStep = 4;

}  // namespace

void KernelEmitter::emit_attention(const Kernel& k, const Launch& l) {
  const AttentionOperands at = attention_operands(k);
  if (shape_numel(at.os) == 0) return;
  const DType cdt = ops::compute_dtype(at.odt);
  if (at.op == ops::OpId::attention_grad) {
    const AttentionGradTiling t =
        attention_grad_tiling(cdt, at.d, at.dv, at.wrt == ops::AttentionWrt::q ? at.tq : at.tk,
                              shape_numel(at.batch), s_.varies(k));
    if (t.tiled) return emit_attention_grad_tiled(at, l, t);
    return emit_attention_grad_rows(at, l, t);
  }
  if (at.M >= 0) return emit_attention_keys(at, l, attention_key_rows(at.tq, s_.varies(k)));
  // attention_lse: the forward without V.
  const bool lse = at.op == ops::OpId::attention_lse;
  const std::string T = compute_type(at.odt);
  const AttentionTiling tiling = attention_tiling(cdt, at.d, lse ? at.d : at.dv);
  if (tiling.tiled) return emit_attention_tiled(at, l, tiling);
  const int tpr = tiling.threads_per_row;
  const int w =
      cdt == DType::f32 && at.d % (4 * tpr) == 0 && (lse || at.dv % (4 * tpr) == 0) ? 4 : 1;
  const int64_t dpt = (at.d + tpr - 1) / tpr, dvpt = (at.dv + tpr - 1) / tpr;  // dims per thread
  // Key tile: as many keys as fit K and V in 32 KiB of shared memory, 8 to 64.
  const int64_t bytes_per_key = (at.d + at.dv) * static_cast<int64_t>(dtype_size(cdt));
  int64_t kt = 64;
  while (kt > 8 && kt * bytes_per_key > 32768) kt /= 2;
  const std::string D = std::to_string(at.d), DV = std::to_string(at.dv), KT = std::to_string(kt);
  const std::string TPR = std::to_string(tpr), W = std::to_string(w);
  const std::string ROWS = std::to_string(tiling.rows);
  // The head dim of element i (< dims per thread) of this thread.
  const std::string dim =
      "(zc_i / " + W + ") * " + std::to_string(w * tpr) + " + zc_j * " + W + " + zc_i % " + W;
  // Calls `body` with the expression of tile row `row`'s element i of this thread, inside a
  // loop over i; with float4 reads, one vector per group of four.
  auto for_each_dim = [&](const std::string& tile, int64_t per_thread, const std::string& row,
                          const std::string& limit, const std::function<void(std::string)>& body) {
    w_.line("#pragma unroll");
    if (w == 4) {
      w_.open("for (int zc_g = 0; zc_g < " + std::to_string(per_thread / 4) + "; ++zc_g)");
      w_.line("const float4 zc_t = *reinterpret_cast<const float4*>(&" + tile + "[" + row +
              "][zc_g * " + std::to_string(4 * tpr) + " + zc_j * 4]);");
      const char* lane[] = {"x", "y", "z", "w"};
      for (int c = 0; c < 4; ++c) {
        w_.open("");
        w_.line("const int zc_i = zc_g * 4 + " + std::to_string(c) + ";");
        body(std::string("zc_t.") + lane[c]);
        w_.close();
      }
      w_.close();
    } else {
      w_.open("for (int zc_i = 0; zc_i < " + std::to_string(per_thread) + "; ++zc_i)");
      w_.line("const int zc_d = " + dim + ";");
      w_.open("if (zc_d < " + limit + ")");
      body(tile + "[" + row + "][zc_d]");
      w_.close();
      w_.close();
    }
  };

  w_.line("__shared__ __align__(16) " + T + " zc_k[" + KT + "][" + D + "];");
  if (!lse) w_.line("__shared__ __align__(16) " + T + " zc_v[" + KT + "][" + DV + "];");
  w_.line("const int zc_j = threadIdx.x % " + TPR + ";");
  w_.line("const idx_t zc_q = (idx_t)blockIdx.x * " + ROWS + " + threadIdx.x / " + TPR + ";");
  w_.line("const bool zc_live = zc_q < " + num(at.tq) + ";");
  // The keys this block's rows see: all, or (causal) up to its last row.
  std::string end = num(at.tk);
  if (at.a.causal) end = "min((idx_t)" + end + ", ((idx_t)blockIdx.x + 1) * " + ROWS + ")";
  w_.line("const idx_t zc_end = " + end + ";");
  w_.open("for (idx_t zc_z = blockIdx.y; zc_z < " + num(l.grid_y) + "; zc_z += gridDim.y)");
  Names b = decompose(at.batch, "zc_z", "zb");
  w_.line(T + " q[" + std::to_string(dpt) + "]" +
          (lse ? "" : ", acc[" + std::to_string(dvpt) + "]") + ";");
  w_.line(T + " m = -INFINITY, s_sum = 0;");
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + std::to_string(dpt) + "; ++zc_i)");
  w_.line("const int zc_d = " + dim + ";");
  w_.line("q[zc_i] = zc_live && zc_d < " + D + " ? (" + T + ")" +
          load(at.Q, at.names(at.qs, b, "zc_q", "zc_d")) + " : (" + T + ")0;");
  w_.close();
  if (!lse) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_i = 0; zc_i < " + std::to_string(dvpt) + "; ++zc_i) acc[zc_i] = 0;");
  }
  w_.open("for (idx_t zc_k0 = 0; zc_k0 < zc_end; zc_k0 += " + KT + ")");
  w_.line("__syncthreads();");
  for (auto [tile, src, shape, width] :
       {std::tuple{"zc_k", at.K, at.ks, D}, std::tuple{"zc_v", at.V, at.vs, DV}}) {
    if (src < 0) continue;  // attention_lse has no V
    // A constant trip count, unrolled: each thread has several loads in flight, not one.
    const int64_t elements = kt * std::stoll(width);
    w_.line("#pragma unroll 8");
    w_.open("for (int zc_r = 0; zc_r < " +
            std::to_string((elements + kAttentionThreads - 1) / kAttentionThreads) + "; ++zc_r)");
    w_.line("const int zc_e = zc_r * " + std::to_string(kAttentionThreads) + " + threadIdx.x;");
    if (elements % kAttentionThreads != 0) {
      w_.line("if (zc_e >= " + std::to_string(elements) + ") break;");
    }
    w_.line("const int zc_kk = zc_e / " + width + ", zc_d = zc_e % " + width + ";");
    w_.line("const idx_t zc_key = zc_k0 + zc_kk;");
    w_.line(std::string(tile) + "[zc_kk][zc_d] = zc_key < " + num(at.tk) + " ? (" + T + ")" +
            load(src, at.names(shape, b, "zc_key", "zc_d")) + " : (" + T + ")0;");
    w_.close();
  }
  w_.line("__syncthreads();");
  // Block-uniform bounds: every thread takes the same steps.
  w_.open("for (int zc_kk = 0; zc_kk < " + KT +
          " && zc_k0 + zc_kk < zc_end; zc_kk += " + std::to_string(kKeysPerStep) + ")");
  const std::string U = std::to_string(kKeysPerStep);
  w_.line(T + " s[" + U + "];");
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + U + "; ++zc_u)");
  w_.line("s[zc_u] = 0;");
  for_each_dim("zc_k", dpt, "zc_kk + zc_u", D,
               [&](const std::string& e) { w_.line("s[zc_u] += q[zc_i] * " + e + ";"); });
  w_.close();
  w_.line("#pragma unroll");
  w_.open("for (int zc_o = " + std::to_string(tpr / 2) + "; zc_o > 0; zc_o /= 2)");
  w_.line("#pragma unroll");
  w_.line("for (int zc_u = 0; zc_u < " + U +
          "; ++zc_u) s[zc_u] += __shfl_xor_sync(0xffffffffu, s[zc_u], zc_o);");
  w_.close();
  w_.line(T + " m_new = m;");
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + U + "; ++zc_u)");
  w_.line("const idx_t zc_key = zc_k0 + zc_kk + zc_u;");
  w_.line("s[zc_u] = zc_key < zc_end" + std::string(at.a.causal ? " && zc_key <= zc_q" : "") +
          " ? s[zc_u] * " + literal(at.a.scale, cdt) + " : -INFINITY;");
  w_.line("m_new = s[zc_u] > m_new ? s[zc_u] : m_new;");
  w_.close();
  // No visible key yet (m_new is -inf): nothing to add, and nothing to rescale.
  w_.line("const " + T + " corr = m_new == -INFINITY ? (" + T + ")1 : zc_exp(m - m_new);");
  w_.line(T + " p[" + U + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_u = 0; zc_u < " + U + "; ++zc_u) p[zc_u] = s[zc_u] == -INFINITY ? (" + T +
          ")0 : zc_exp(s[zc_u] - m_new);");
  w_.line("s_sum = s_sum * corr + (p[0] + p[1]) + (p[2] + p[3]);");
  if (!lse) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_i = 0; zc_i < " + std::to_string(dvpt) + "; ++zc_i) acc[zc_i] *= corr;");
    w_.line("#pragma unroll");
    w_.open("for (int zc_u = 0; zc_u < " + U + "; ++zc_u)");
    for_each_dim("zc_v", dvpt, "zc_kk + zc_u", DV,
                 [&](const std::string& e) { w_.line("acc[zc_i] += p[zc_u] * " + e + ";"); });
    w_.close();
  }
  w_.line("m = m_new;");
  w_.close();
  w_.close();
  if (lse) {
    // The scores were summed across the row's threads, so each holds the row's maximum and
    // sum; one writes. A row that saw no key (an empty Tk) is -inf, as the eager kernel's.
    const std::string reg = "v" + std::to_string(at.O);
    w_.open("if (zc_live && zc_j == 0)");
    w_.line(T + " " + reg + " = s_sum > 0 ? m + zc_log(s_sum) : (" + T + ")-INFINITY;");
    w_.line(store(at.O, at.row_names(at.os, b, "zc_q"), reg));
    w_.close();
    w_.close();
    return;
  }
  w_.open("if (zc_live)");
  const std::string reg = "v" + std::to_string(at.O);
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + std::to_string(dvpt) + "; ++zc_i)");
  w_.line("const int zc_d = " + dim + ";");
  w_.open("if (zc_d < " + DV + ")");
  // No key at all (an empty Tk) gives zeros, as the eager kernel's empty product does.
  w_.line(T + " " + reg + " = s_sum > 0 ? acc[zc_i] / s_sum : (" + T + ")0;");
  w_.line(store(at.O, at.names(at.os, b, "zc_q", "zc_d"), reg));
  w_.close();
  w_.close();
  w_.close();
  w_.close();
}

}  // namespace zc::codegen::cuda
