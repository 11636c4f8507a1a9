// Matmuls generated as a tiled kernel: each block computes a 16x16 tile of one product, its
// threads staging 16x16 tiles of A and B through shared memory, and each thread accumulates
// its element in k order in the compute type (as the C++ backend's inline products do), then
// runs the fused epilogue on it. Any dtype; the batch dims broadcast as the eager kernel's.
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
  const std::string T = compute_type(cdt), tile = std::to_string(kMatmulTile);
  const std::string M = std::to_string(d.M), N = std::to_string(d.N), K = std::to_string(d.K);
  // One extra column keeps the threads of a warp reading a column of A's tile off one bank.
  w_.line("__shared__ " + T + " zc_at[" + tile + "][" + tile + " + 1];");
  w_.line("__shared__ " + T + " zc_bt[" + tile + "][" + tile + " + 1];");
  w_.line("const int zc_tx = threadIdx.x, zc_ty = threadIdx.y;");
  w_.line("const idx_t zc_m = (idx_t)blockIdx.y * " + tile + " + zc_ty;");
  w_.line("const idx_t zc_n = (idx_t)blockIdx.x * " + tile + " + zc_tx;");
  w_.open("for (idx_t zc_z = blockIdx.z; zc_z < " + std::to_string(l.grid_z) +
          "; zc_z += gridDim.z)");
  // Not "b": the buffers are b<value id>.
  Names batch = decompose(d.batch, "zc_z", "zb");
  w_.line(T + " acc = 0;");
  w_.open("for (idx_t zc_k0 = 0; zc_k0 < " + K + "; zc_k0 += " + tile + ")");
  w_.line("const idx_t zc_ka = zc_k0 + zc_tx, zc_kb = zc_k0 + zc_ty;");
  w_.line("zc_at[zc_ty][zc_tx] = zc_m < " + M + " && zc_ka < " + K + " ? (" + T + ")" +
          load(A, mi.a(batch, "zc_m", "zc_ka")) + " : (" + T + ")0;");
  w_.line("zc_bt[zc_ty][zc_tx] = zc_kb < " + K + " && zc_n < " + N + " ? (" + T + ")" +
          load(B, mi.b(batch, "zc_kb", "zc_n")) + " : (" + T + ")0;");
  w_.line("__syncthreads();");
  w_.line("#pragma unroll");
  w_.line("for (int zc_kk = 0; zc_kk < " + tile + "; ++zc_kk) acc += zc_at[zc_ty][zc_kk] * " +
          "zc_bt[zc_kk][zc_tx];");
  w_.line("__syncthreads();");
  w_.close();
  w_.open("if (zc_m < " + M + " && zc_n < " + N + ")");
  Names names = mi.c(batch, "zc_m", "zc_n");
  const std::string reg = "v" + std::to_string(C);
  w_.line(T + " " + reg + " = acc;");
  std::string round = round_to_storage(cdt, reg);
  if (!round.empty()) w_.line(round);
  for (int32_t idx : k.nodes) {
    if (idx != k.anchor) emit_node(idx, names);
  }
  for (ValueId v : k.stores) w_.line(store(v, names, "v" + std::to_string(v)));
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
