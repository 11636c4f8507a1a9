// Matmuls generated as a tiled kernel: a block of 16x16 threads computes a tile of one product
// of (16 * micro) x (16 * micro) elements, each thread a micro x micro patch of it in registers
// (launch.h: matmul_micro_tile), staging kMatmulTileK-deep slices of A and B through shared
// memory. Each element is still accumulated in k order in the compute type (as the C++
// backend's inline products do), so the tile size changes speed, never results. The fused
// epilogue then runs on each element. Any dtype; the batch dims broadcast as the eager kernel's.
#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/c_expr.h"
#include "ops/shape_rules.h"

namespace zc::codegen::cuda {

using ir::ValueId;

void KernelEmitter::emit_matmul(const Kernel& k, const Launch& l) {
  if (l.library) {
    emit_library_epilogue(k, l);
    return;
  }
  const ir::Node& n = s_.graph.nodes[k.anchor];
  ValueId A = n.inputs[0], B = n.inputs[1], C = n.outputs[0];
  const MatmulIndex mi = matmul_index(s_.graph.meta(A).shape, s_.graph.meta(B).shape);
  const ops::MatmulShapes& d = mi.d;
  if (shape_numel(k.space) == 0) return;
  DType cdt = s_.graph.meta(C).dtype;
  const std::string T = compute_type(cdt);
  const int micro = l.micro;
  const int tile = kMatmulThreads * micro;  // the block's tile edge, in elements
  const int loads = tile * kMatmulTileK / (kMatmulThreads * kMatmulThreads);  // per thread
  const std::string M = num(d.M), N = num(d.N), K = num(d.K);
  const std::string TL = std::to_string(tile), TK = std::to_string(kMatmulTileK),
                    MT = std::to_string(micro);
  // A's slice is stored k-major, like B's, so that a thread reads its micro rows of A and its
  // micro columns of B from one row of each. One extra column keeps the stores off one bank.
  w_.line("__shared__ " + T + " zc_at[" + TK + "][" + TL + " + 1];");
  w_.line("__shared__ " + T + " zc_bt[" + TK + "][" + TL + " + 1];");
  w_.line("const int zc_tx = threadIdx.x, zc_ty = threadIdx.y;");
  w_.line("const int zc_t = zc_ty * " + std::to_string(kMatmulThreads) + " + zc_tx;");
  w_.line("const idx_t zc_m0 = (idx_t)blockIdx.y * " + TL + ", zc_n0 = (idx_t)blockIdx.x * " + TL +
          ";");
  w_.open("for (idx_t zc_z = blockIdx.z; zc_z < " + num(l.grid_z) + "; zc_z += gridDim.z)");
  // Not "b": the buffers are b<value id>.
  Names batch = decompose(d.batch, "zc_z", "zb");
  w_.line(T + " acc[" + MT + "][" + MT + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + MT + "; ++zc_i)");
  w_.line("  for (int zc_j = 0; zc_j < " + MT + "; ++zc_j) acc[zc_i][zc_j] = 0;");
  w_.open("for (idx_t zc_k0 = 0; zc_k0 < " + K + "; zc_k0 += " + TK + ")");
  // Consecutive threads take consecutive elements along the dim each operand is contiguous in,
  // so that the slices' loads coalesce: k of A and n of B when they are dense, m of a
  // transposed A and k of a transposed B.
  auto transposed = [&](ValueId v) {
    const Shape& shape = s_.graph.meta(v).shape;
    if (shape.size() < 2) return false;
    const Shape& strides = s_.at(v).view.strides;
    return strides.back() != 1 && strides[strides.size() - 2] == 1;
  };
  const bool a_t = transposed(A), b_t = transposed(B);
  const std::string am = a_t ? "zc_e % " + TL : "zc_e / " + TK;
  const std::string ak = a_t ? "zc_e / " + TL : "zc_e % " + TK;
  const std::string bk = b_t ? "zc_e % " + TK : "zc_e / " + TL;
  const std::string bn = b_t ? "zc_e / " + TK : "zc_e % " + TL;
  w_.line("#pragma unroll");
  w_.open("for (int zc_r = 0; zc_r < " + std::to_string(loads) + "; ++zc_r)");
  w_.line("const int zc_e = zc_t + zc_r * " + std::to_string(kMatmulThreads * kMatmulThreads) +
          ";");
  w_.line("const int zc_ai = " + am + ", zc_ak = " + ak + ";");
  w_.line("const idx_t zc_am = zc_m0 + zc_ai, zc_ka = zc_k0 + zc_ak;");
  w_.line("zc_at[zc_ak][zc_ai] = zc_am < " + M + " && zc_ka < " + K + " ? (" + T + ")" +
          load(A, mi.a(batch, "zc_am", "zc_ka")) + " : (" + T + ")0;");
  w_.line("const int zc_bi = " + bn + ", zc_bk = " + bk + ";");
  w_.line("const idx_t zc_bn = zc_n0 + zc_bi, zc_kb = zc_k0 + zc_bk;");
  w_.line("zc_bt[zc_bk][zc_bi] = zc_kb < " + K + " && zc_bn < " + N + " ? (" + T + ")" +
          load(B, mi.b(batch, "zc_kb", "zc_bn")) + " : (" + T + ")0;");
  w_.close();
  w_.line("__syncthreads();");
  w_.line("#pragma unroll");
  w_.open("for (int zc_kk = 0; zc_kk < " + TK + "; ++zc_kk)");
  w_.line(T + " zc_a[" + MT + "], zc_b[" + MT + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + MT + "; ++zc_i) zc_a[zc_i] = zc_at[zc_kk][zc_ty * " + MT +
          " + zc_i];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_j = 0; zc_j < " + MT + "; ++zc_j) zc_b[zc_j] = zc_bt[zc_kk][zc_tx * " + MT +
          " + zc_j];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + MT + "; ++zc_i)");
  w_.line("  for (int zc_j = 0; zc_j < " + MT +
          "; ++zc_j) acc[zc_i][zc_j] += zc_a[zc_i] * zc_b[zc_j];");
  w_.close();
  w_.line("__syncthreads();");
  w_.close();
  // The epilogue, element by element of the thread's patch.
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + MT + "; ++zc_i)");
  w_.line("#pragma unroll");
  w_.open("for (int zc_j = 0; zc_j < " + MT + "; ++zc_j)");
  w_.line("const idx_t zc_m = zc_m0 + zc_ty * " + MT + " + zc_i, zc_n = zc_n0 + zc_tx * " + MT +
          " + zc_j;");
  w_.open("if (zc_m < " + M + " && zc_n < " + N + ")");
  Names names = mi.c(batch, "zc_m", "zc_n");
  const std::string reg = "v" + std::to_string(C);
  w_.line(T + " " + reg + " = acc[zc_i][zc_j];");
  std::string round = round_to_storage(cdt, reg);
  if (!round.empty()) w_.line(round);
  for (int32_t idx : k.nodes) {
    if (idx != k.anchor) emit_node(idx, names);
  }
  for (ValueId v : k.stores) w_.line(store(v, names, "v" + std::to_string(v)));
  w_.close();
  w_.close();
  w_.close();
  w_.close();
}

// cuBLASLt wrote the product to memory: the epilogue reads it from there, element by element.
void KernelEmitter::emit_library_epilogue(const Kernel& k, const Launch& l) {
  const ValueId C = s_.graph.nodes[k.anchor].outputs[0];
  library_output_ = C;
  emit_elementwise_loops(k, l, C);
}

}  // namespace zc::codegen::cuda
