// Attention with a mask as one kernel: the "keys" form (launch.h's attention_key_rows), made for
// few query rows against many keys, which is a decode step's attention over its KV cache (the
// queries of a group of heads that share a key-value head are the rows, ops' frontend), and
// correct for any number of rows (a prefill's).
//
// A block takes `rows` query rows of one batch item and stages them in shared memory. Its warps
// (up to 16: a decode step has only batch x key-value heads blocks, so the keys are spread over
// a block's warps) take turns at 32 keys: lane j scores key k0 + j against every row (a dot
// product over the head dims, its key's row read in 16-byte chunks where the view allows, the
// rows read from shared memory as broadcasts), applies the scale, the causal limit
// and the mask (a boolean one hides keys, a floating one is added), and the warp updates each
// row's running maximum (shuffles), the lanes' partial sums and the output accumulators, whose
// value dims are spread over the lanes: for each of the 32 keys, its weight goes to every lane
// by a shuffle and the lanes read that key's value row together (coalesced; 16 keys' rows in
// flight at once). The warps' states
// meet in shared memory at the end, each rescaled to the largest maximum. Sums are in the
// compute type; a row that sees no key gives zeros (ops/attention.cpp).
#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/eager.h"
#include "zc/error.h"

namespace zc::codegen::cuda {

void KernelEmitter::emit_attention_keys(const AttentionOperands& at, const Launch& l, int64_t R) {
  const DType cdt = ops::compute_dtype(at.odt);
  const std::string T = compute_type(at.odt);
  const int64_t W = attention_key_warps(cdt, at.d, at.dv, R);
  const int64_t lanes_dims = (at.dv + 31) / 32;  // value dims per lane
  if (W == 0) {
    throw Error("CUDA attention with a mask: head dims " + std::to_string(at.d) + " and " +
                std::to_string(at.dv) + " need more than " +
                std::to_string(kAttentionKeysSharedBytes) + " bytes of shared memory a block");
  }
  const std::string RS = str(R), D = str(at.d), DV = str(at.dv), WS = str(W), DVL = str(lanes_dims);
  const std::string TQ = num(at.tq), TK = num(at.tk);
  w_.line("__shared__ " + T + " zc_qs[" + RS + "][" + D + "];");
  w_.line("__shared__ " + T + " zc_wm[" + WS + "][" + RS + "], zc_wl[" + WS + "][" + RS + "];");
  w_.line("__shared__ " + T + " zc_wacc[" + WS + "][" + RS + "][" + DV + "];");
  if (l.vector > 1) declare_vector_check({at.K});
  w_.line("const int zc_lane = threadIdx.x % 32, zc_warp = threadIdx.x / 32;");
  w_.line("const idx_t zc_r0 = (idx_t)blockIdx.x * " + RS + ";");
  // The keys this block's rows see: all, or (causal, top-left aligned) up to its last row.
  std::string end = TK;
  if (at.a.causal) end = "min((idx_t)" + TK + ", zc_r0 + " + RS + ")";
  w_.line("const idx_t zc_end = " + end + ";");
  w_.open("for (idx_t zc_z = blockIdx.y; zc_z < " + num(l.grid_y) + "; zc_z += gridDim.y)");
  const Names b = decompose(at.batch, "zc_z", "zb");
  w_.line("__syncthreads();");  // the last batch item's reads of shared memory are done
  w_.open("for (int zc_e = threadIdx.x; zc_e < " + str(R * at.d) + "; zc_e += blockDim.x)");
  w_.line("const int zc_r = zc_e / " + D + ", zc_d = zc_e % " + D + ";");
  w_.line("const idx_t zc_q = zc_r0 + zc_r;");
  w_.line("zc_qs[zc_r][zc_d] = zc_q < " + TQ + " ? (" + T + ")" +
          load(at.Q, at.names(at.qs, b, "zc_q", "zc_d")) + " : (" + T + ")0;");
  w_.close();
  w_.line("__syncthreads();");
  w_.line(T + " m[" + RS + "], l[" + RS + "], acc[" + RS + "][" + DVL + "];");
  w_.line("#pragma unroll");
  w_.open("for (int zc_r = 0; zc_r < " + RS + "; ++zc_r)");
  w_.line("m[zc_r] = -INFINITY;");
  w_.line("l[zc_r] = 0;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + DVL + "; ++zc_i) acc[zc_r][zc_i] = 0;");
  w_.close();

  w_.open("for (idx_t zc_k0 = (idx_t)zc_warp * 32; zc_k0 < zc_end; zc_k0 += " + str(W * 32) + ")");
  w_.line("const idx_t zc_key = zc_k0 + zc_lane;");
  w_.line("const bool zc_in = zc_key < zc_end;");
  w_.line(T + " s[" + RS + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_r = 0; zc_r < " + RS + "; ++zc_r) s[zc_r] = 0;");
  w_.open("if (zc_in)");
  // Each query row's dot product with this lane's key, the row read from shared memory (the
  // same address in every lane: a broadcast).
  auto add_products = [&](const std::string& dim, const std::string& kd) {
    w_.line("#pragma unroll");
    w_.line("for (int zc_r = 0; zc_r < " + RS + "; ++zc_r) s[zc_r] += zc_qs[zc_r][" + dim + "] * " +
            kd + ";");
  };
  const int64_t v = l.vector;
  const DType kdt = s_.graph.meta(s_.base_of(at.K)).dtype;
  if (v > 1) {
    // The key's row in 16-byte chunks, up to eight loads in flight before any is used.
    const int64_t chunks = at.d / v;
    int64_t group = std::min<int64_t>(chunks, 8);  // a divisor of chunks: no read past the row
    while (chunks % group != 0) --group;
    w_.line("const uint4* __restrict__ zc_kr = reinterpret_cast<const uint4*>(&" +
            element_ref(at.K, at.names(at.ks, b, "zc_key", "0")) + ");");
    w_.open("if (zc_vec)");
    w_.line("#pragma unroll");
    w_.open("for (int zc_c0 = 0; zc_c0 < " + str(chunks) + "; zc_c0 += " + str(group) + ")");
    w_.line("uint4 zc_kc[" + str(group) + "];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(group) +
            "; ++zc_c) zc_kc[zc_c] = zc_kr[zc_c0 + zc_c];");
    w_.line("#pragma unroll");
    w_.open("for (int zc_c = 0; zc_c < " + str(group) + "; ++zc_c)");
    w_.line("const " + storage_type(kdt) + "* zc_ke = reinterpret_cast<const " + storage_type(kdt) +
            "*>(&zc_kc[zc_c]);");
    w_.line("#pragma unroll");
    w_.open("for (int zc_e = 0; zc_e < " + str(v) + "; ++zc_e)");
    w_.line("const " + T + " zc_kd = (" + T + ")" + from_storage(kdt, "zc_ke[zc_e]") + ";");
    add_products("(zc_c0 + zc_c) * " + str(v) + " + zc_e", "zc_kd");
    w_.close();
    w_.close();
    w_.close();
    w_.close();
    w_.open("else");
  }
  w_.line("#pragma unroll 1");
  w_.open("for (int zc_d = 0; zc_d < " + D + "; ++zc_d)");
  w_.line("const " + T + " zc_kd = (" + T + ")" + load(at.K, at.names(at.ks, b, "zc_key", "zc_d")) +
          ";");
  add_products("zc_d", "zc_kd");
  w_.close();
  if (v > 1) w_.close();
  w_.close();
  w_.line(T + " p[" + RS + "];");
  w_.line("#pragma unroll");
  w_.open("for (int zc_r = 0; zc_r < " + RS + "; ++zc_r)");
  w_.line("const idx_t zc_q = zc_r0 + zc_r;");
  std::string seen = "zc_in && zc_q < " + TQ;
  if (at.a.causal) seen += " && zc_key <= zc_q";
  std::string score = "s[zc_r] * " + literal(at.a.scale, cdt);
  apply_attention_mask(at, b, "zc_q", "zc_key", T, seen, score);
  w_.line("const " + T + " zc_x = " + seen + " ? " + score + " : (" + T + ")-INFINITY;");
  w_.line(T + " zc_cm = zc_x;");
  w_.line("#pragma unroll");
  w_.line(
      "for (int zc_o = 16; zc_o > 0; zc_o /= 2) zc_cm = max(zc_cm, "
      "__shfl_xor_sync(0xffffffffu, zc_cm, zc_o));");
  w_.line("const " + T + " zc_mn = max(m[zc_r], zc_cm);");
  // Nothing seen yet (the maximum is still -inf): nothing to add and nothing to rescale.
  w_.line("const " + T + " zc_corr = zc_mn == -INFINITY ? (" + T + ")1 : zc_exp(m[zc_r] - zc_mn);");
  w_.line("p[zc_r] = zc_x == -INFINITY ? (" + T + ")0 : zc_exp(zc_x - zc_mn);");
  w_.line("l[zc_r] = l[zc_r] * zc_corr + p[zc_r];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + DVL + "; ++zc_i) acc[zc_r][zc_i] *= zc_corr;");
  w_.line("m[zc_r] = zc_mn;");
  w_.close();
  // The chunk's keys, the warp reading each one's value row together: kValueKeys keys' rows
  // are loaded before any is used (one wait for them, not one per key).
  // (The two halves of the chunk are a loop, not unrolled: that took NVRTC a fifth longer.)
  constexpr int64_t kValueKeys = 16;
  w_.line("#pragma unroll 1");
  w_.open("for (int zc_j0 = 0; zc_j0 < 32; zc_j0 += " + str(kValueKeys) + ")");
  w_.line(T + " zc_v[" + str(kValueKeys) + "][" + DVL + "];");
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + str(kValueKeys) + "; ++zc_u)");
  w_.line("const idx_t zc_vk = zc_k0 + zc_j0 + zc_u;");
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + DVL + "; ++zc_i)");
  w_.line("const int zc_d = zc_lane + 32 * zc_i;");
  w_.line("zc_v[zc_u][zc_i] = zc_vk < zc_end && zc_d < " + DV + " ? (" + T + ")" +
          load(at.V, at.names(at.vs, b, "zc_vk", "zc_d")) + " : (" + T + ")0;");
  w_.close();
  w_.close();
  w_.line("#pragma unroll");
  w_.open("for (int zc_u = 0; zc_u < " + str(kValueKeys) + "; ++zc_u)");
  w_.line("#pragma unroll");
  w_.open("for (int zc_r = 0; zc_r < " + RS + "; ++zc_r)");
  w_.line("const " + T + " zc_p = __shfl_sync(0xffffffffu, p[zc_r], zc_j0 + zc_u);");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + DVL +
          "; ++zc_i) acc[zc_r][zc_i] += zc_p * zc_v[zc_u][zc_i];");
  w_.close();
  w_.close();
  w_.close();
  w_.close();  // key chunks

  // Each warp's state into shared memory: its maximum (the same in every lane), the sum of its
  // lanes' sums, its accumulators.
  w_.line("#pragma unroll");
  w_.open("for (int zc_r = 0; zc_r < " + RS + "; ++zc_r)");
  w_.line(T + " zc_sum = l[zc_r];");
  w_.line("#pragma unroll");
  w_.line(
      "for (int zc_o = 16; zc_o > 0; zc_o /= 2) zc_sum += __shfl_xor_sync(0xffffffffu, "
      "zc_sum, zc_o);");
  w_.open("if (zc_lane == 0)");
  w_.line("zc_wm[zc_warp][zc_r] = m[zc_r];");
  w_.line("zc_wl[zc_warp][zc_r] = zc_sum;");
  w_.close();
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + DVL + "; ++zc_i)");
  w_.line("const int zc_d = zc_lane + 32 * zc_i;");
  w_.line("if (zc_d < " + DV + ") zc_wacc[zc_warp][zc_r][zc_d] = acc[zc_r][zc_i];");
  w_.close();
  w_.close();
  w_.line("__syncthreads();");
  w_.open("for (int zc_e = threadIdx.x; zc_e < " + str(R * at.dv) + "; zc_e += blockDim.x)");
  w_.line("const int zc_r = zc_e / " + DV + ", zc_d = zc_e % " + DV + ";");
  w_.line("const idx_t zc_q = zc_r0 + zc_r;");
  w_.line("if (zc_q >= " + TQ + ") continue;");
  w_.line(T + " zc_mx = -INFINITY;");
  w_.line("#pragma unroll");
  w_.line("for (int zc_w = 0; zc_w < " + WS + "; ++zc_w) zc_mx = max(zc_mx, zc_wm[zc_w][zc_r]);");
  w_.line(T + " zc_den = 0, zc_num = 0;");
  w_.open("if (zc_mx != -INFINITY)");
  w_.line("#pragma unroll");
  w_.open("for (int zc_w = 0; zc_w < " + WS + "; ++zc_w)");
  w_.line("const " + T + " zc_f = zc_wm[zc_w][zc_r] == -INFINITY ? (" + T +
          ")0 : zc_exp(zc_wm[zc_w][zc_r] - zc_mx);");
  w_.line("zc_den += zc_wl[zc_w][zc_r] * zc_f;");
  w_.line("zc_num += zc_wacc[zc_w][zc_r][zc_d] * zc_f;");
  w_.close();
  w_.close();
  const std::string reg = "v" + std::to_string(at.O);
  w_.line(T + " " + reg + " = zc_den > 0 ? zc_num / zc_den : (" + T + ")0;");
  w_.line(store(at.O, at.names(at.os, b, "zc_q", "zc_d"), reg));
  w_.close();
  w_.close();  // batch items
}

}  // namespace zc::codegen::cuda
