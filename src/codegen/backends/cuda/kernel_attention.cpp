// Attention as one kernel: softmax(q k^T * scale [causal]) v without the [Tq, Tk] scores in
// memory. Each block takes 64 query rows of one batch item, a thread per row holding its query
// and its output accumulator in registers; the block stages tiles of K and V through shared
// memory, and each thread runs the online softmax over them (a running maximum and sum,
// rescaling the accumulator when the maximum grows). A causal block stops at the last key its
// last row sees. Scores are scaled after the dot product and the sum is in the compute type.
#include <algorithm>

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"

namespace zc::codegen::cuda {

using ir::ValueId;

void KernelEmitter::emit_attention(const Kernel& k, const Launch& l) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  const auto& a = std::get<ops::AttentionAttrs>(n.attrs);
  ValueId Q = n.inputs[0], K = n.inputs[1], V = n.inputs[2], O = n.outputs[0];
  const Shape& qs = s_.graph.meta(Q).shape;
  const Shape& ks = s_.graph.meta(K).shape;
  const Shape& vs = s_.graph.meta(V).shape;
  const Shape& os = s_.graph.meta(O).shape;
  if (shape_numel(os) == 0) return;
  const int64_t tq = qs[qs.size() - 2], tk = ks[ks.size() - 2], d = qs.back(), dv = vs.back();
  const Shape batch(os.begin(), os.end() - 2);
  const DType odt = s_.graph.meta(O).dtype;
  const std::string T = compute_type(odt);
  // Key tile: as many keys as fit K and V in 32 KiB of shared memory, 8 to 64.
  const int64_t bytes_per_key =
      (d + dv) * static_cast<int64_t>(dtype_size(ops::compute_dtype(odt)));
  int64_t kt = 64;
  while (kt > 8 && kt * bytes_per_key > 32768) kt /= 2;
  const std::string D = std::to_string(d), DV = std::to_string(dv), KT = std::to_string(kt);
  auto names = [&](const Shape& operand, const Names& b, const std::string& row,
                   const std::string& col) {
    Names out = broadcast(Shape(operand.begin(), operand.end() - 2), batch, b);
    out.push_back(row);
    out.push_back(col);
    return out;
  };
  w_.line("__shared__ " + T + " zc_k[" + KT + "][" + D + "];");
  w_.line("__shared__ " + T + " zc_v[" + KT + "][" + DV + "];");
  w_.open("for (idx_t zc_z = blockIdx.y; zc_z < " + std::to_string(l.grid_y) +
          "; zc_z += gridDim.y)");
  Names b = decompose(batch, "zc_z", "zb");
  w_.line("const idx_t zc_q = (idx_t)blockIdx.x * " + std::to_string(kAttentionRows) +
          " + threadIdx.x;");
  w_.line("const bool zc_live = zc_q < " + std::to_string(tq) + ";");
  w_.line(T + " q[" + D + "], acc[" + DV + "];");
  w_.line(T + " m = -INFINITY, s_sum = 0;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_d = 0; zc_d < " + D + "; ++zc_d) q[zc_d] = zc_live ? (" + T + ")" +
          load(Q, names(qs, b, "zc_q", "zc_d")) + " : (" + T + ")0;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_d = 0; zc_d < " + DV + "; ++zc_d) acc[zc_d] = 0;");
  // The keys this block's rows see: all, or (causal) up to its last row.
  std::string end = std::to_string(tk);
  if (a.causal) {
    end = "min((idx_t)" + std::to_string(tk) + ", ((idx_t)blockIdx.x + 1) * " +
          std::to_string(kAttentionRows) + ")";
  }
  w_.line("const idx_t zc_end = " + end + ";");
  w_.open("for (idx_t zc_k0 = 0; zc_k0 < zc_end; zc_k0 += " + KT + ")");
  w_.line("__syncthreads();");
  w_.open("for (int zc_e = threadIdx.x; zc_e < " + KT + " * " + D + "; zc_e += blockDim.x)");
  w_.line("const int zc_kk = zc_e / " + D + ", zc_d = zc_e % " + D + ";");
  w_.line("const idx_t zc_key = zc_k0 + zc_kk;");
  w_.line("zc_k[zc_kk][zc_d] = zc_key < " + std::to_string(tk) + " ? (" + T + ")" +
          load(K, names(ks, b, "zc_key", "zc_d")) + " : (" + T + ")0;");
  w_.close();
  w_.open("for (int zc_e = threadIdx.x; zc_e < " + KT + " * " + DV + "; zc_e += blockDim.x)");
  w_.line("const int zc_kk = zc_e / " + DV + ", zc_d = zc_e % " + DV + ";");
  w_.line("const idx_t zc_key = zc_k0 + zc_kk;");
  w_.line("zc_v[zc_kk][zc_d] = zc_key < " + std::to_string(tk) + " ? (" + T + ")" +
          load(V, names(vs, b, "zc_key", "zc_d")) + " : (" + T + ")0;");
  w_.close();
  w_.line("__syncthreads();");
  w_.line("if (!zc_live) continue;");
  w_.open("for (int zc_kk = 0; zc_kk < " + KT + "; ++zc_kk)");
  w_.line("const idx_t zc_key = zc_k0 + zc_kk;");
  w_.line("if (zc_key >= zc_end" + std::string(a.causal ? " || zc_key > zc_q" : "") + ") break;");
  w_.line(T + " s = 0;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_d = 0; zc_d < " + D + "; ++zc_d) s += q[zc_d] * zc_k[zc_kk][zc_d];");
  w_.line("s *= " + literal(a.scale, ops::compute_dtype(odt)) + ";");
  w_.line("const " + T + " m_new = s > m ? s : m;");
  w_.line("const " + T + " corr = zc_exp(m - m_new), p = zc_exp(s - m_new);");
  w_.line("s_sum = s_sum * corr + p;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_d = 0; zc_d < " + DV + "; ++zc_d) acc[zc_d] = acc[zc_d] * corr + p * " +
          "zc_v[zc_kk][zc_d];");
  w_.line("m = m_new;");
  w_.close();
  w_.close();
  w_.open("if (zc_live)");
  const std::string reg = "v" + std::to_string(O);
  w_.line("#pragma unroll");
  w_.open("for (int zc_d = 0; zc_d < " + DV + "; ++zc_d)");
  // No key at all (an empty Tk) gives zeros, as the eager kernel's empty product does.
  w_.line(T + " " + reg + " = s_sum > 0 ? acc[zc_d] / s_sum : (" + T + ")0;");
  w_.line(store(O, names(os, b, "zc_q", "zc_d"), reg));
  w_.close();
  w_.close();
  w_.close();
}

}  // namespace zc::codegen::cuda
