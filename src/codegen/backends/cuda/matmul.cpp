// Matmuls generated as a tiled kernel: a block of 16x16 threads computes a tile of one product
// of (16 * micro) x (16 * micro) elements, each thread a micro x micro patch of it in registers
// (launch.h: matmul_micro_tile), staging kMatmulTileK-deep slices of A and B through shared
// memory. Each element is still accumulated in k order in the compute type (as the C++
// backend's inline products do), so the tile size changes speed, never results. The fused
// epilogue then runs on each element. Any dtype; the batch dims broadcast as the eager kernel's.
#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/backends/cuda/launch.h"
#include "codegen/c_expr.h"
#include "ops/shape_rules.h"

namespace zc::codegen::cuda {

using ir::ValueId;

void KernelEmitter::emit_matmul(const Kernel& k, const Launch& l) {
  if (l.library) {
    emit_library_epilogue(k, l);
    return;
  }
  if (k.rows) {
    emit_matmul_rows(k, l);
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

// A product of a few rows (Kernel::rows): warp w of block x computes column n = x * kRowsWarps
// + w of every row of C, reading B's row n (B is dense along k: a weight [N, K] read as W^T)
// once. Each lane takes chunks of `v` consecutive k (rows_vector) with one 16-byte load of B
// (and of A's rows, which every warp of the block shares through the cache), issuing kRowsUnroll
// chunks' loads before using any, so that a warp keeps several KB of the weight in flight; the
// M sums stay in registers and meet by shuffles. Where the pointers are not 16-byte aligned
// when it runs (zc_vec), or v is 1, lanes stride along k one element at a time. The order of
// the sums depends only on the sizes: the product is the same on every run, though not summed
// in k order as the tiled form's are. Lane 0 runs the epilogue on the M elements of column n.
void KernelEmitter::emit_matmul_rows(const Kernel& k, const Launch& l) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  ValueId A = n.inputs[0], B = n.inputs[1], C = n.outputs[0];
  const MatmulIndex mi = matmul_index(s_.graph.meta(A).shape, s_.graph.meta(B).shape);
  const ops::MatmulShapes& d = mi.d;
  if (shape_numel(k.space) == 0) return;
  const DType cdt = s_.graph.meta(C).dtype;
  const DType adt = s_.graph.meta(s_.base_of(A)).dtype, bdt = s_.graph.meta(s_.base_of(B)).dtype;
  const std::string T = compute_type(cdt), M = str(d.M), K = num(d.K);
  const int64_t v = l.vector;
  w_.line("const int zc_lane = threadIdx.x & 31;");
  w_.line("const idx_t zc_n = (idx_t)blockIdx.x * " + str(kRowsWarps) + " + (threadIdx.x >> 5);");
  w_.line("if (zc_n >= " + num(d.N) + ") return;  // the warp's column is past the end: all of it");
  if (v > 1) declare_vector_check({A, B});
  w_.open("for (idx_t zc_z = blockIdx.z; zc_z < " + num(l.grid_z) + "; zc_z += gridDim.z)");
  Names batch = decompose(d.batch, "zc_z", "zb");
  // Row i of A and column n of B at k = 0; both run along k with stride 1.
  w_.line("const " + storage_type(bdt) + "* __restrict__ zc_b = &" +
          element_ref(B, mi.b(batch, "0", "zc_n")) + ";");
  for (int64_t i = 0; i < d.M; ++i) {
    w_.line("const " + storage_type(adt) + "* __restrict__ zc_a" + str(i) + " = &" +
            element_ref(A, mi.a(batch, str(i), "0")) + ";");
  }
  w_.line(T + " acc[" + M + "];");
  w_.line("#pragma unroll");
  w_.line("for (int zc_i = 0; zc_i < " + M + "; ++zc_i) acc[zc_i] = 0;");
  auto elem = [&](DType t, const std::string& e) { return "(" + T + ")" + from_storage(t, e); };
  if (v > 1) {
    // A chunk is v elements: one 16-byte load of the narrower operand, one or more of the
    // wider one.
    const int64_t step = 32 * v;
    const std::string V = str(v);
    w_.open("if (zc_vec)");
    w_.open("for (idx_t zc_k0 = (idx_t)zc_lane * " + V + "; zc_k0 < " + K +
            "; zc_k0 += " + str(step * kRowsUnroll) + ")");
    w_.line("__align__(16) " + storage_type(bdt) + " zc_bh[" + str(kRowsUnroll) + "][" + V + "];");
    w_.line("#pragma unroll");
    w_.open("for (int zc_u = 0; zc_u < " + str(kRowsUnroll) + "; ++zc_u)");
    w_.line("const idx_t zc_k = zc_k0 + zc_u * " + str(step) + ";");
    w_.open("if (zc_k < " + K + ")");
    w_.line("#pragma unroll");
    w_.line("for (int zc_c = 0; zc_c < " + str(v * static_cast<int64_t>(dtype_size(bdt)) / 16) +
            "; ++zc_c) reinterpret_cast<uint4*>(zc_bh[zc_u])[zc_c] = "
            "reinterpret_cast<const uint4*>(zc_b + zc_k)[zc_c];");
    w_.close();
    w_.close();
    w_.line("#pragma unroll");
    w_.open("for (int zc_u = 0; zc_u < " + str(kRowsUnroll) + "; ++zc_u)");
    w_.line("const idx_t zc_k = zc_k0 + zc_u * " + str(step) + ";");
    w_.line("if (zc_k >= " + K + ") break;");
    for (int64_t i = 0; i < d.M; ++i) {
      const std::string a = "zc_a" + str(i);
      w_.open("");
      w_.line("__align__(16) " + storage_type(adt) + " zc_ah[" + V + "];");
      w_.line("#pragma unroll");
      w_.line("for (int zc_c = 0; zc_c < " + str(v * static_cast<int64_t>(dtype_size(adt)) / 16) +
              "; ++zc_c) reinterpret_cast<uint4*>(zc_ah)[zc_c] = reinterpret_cast<const uint4*>(" +
              a + " + zc_k)[zc_c];");
      w_.line("#pragma unroll");
      w_.line("for (int zc_c = 0; zc_c < " + V + "; ++zc_c) acc[" + str(i) +
              "] += " + elem(adt, "zc_ah[zc_c]") + " * " + elem(bdt, "zc_bh[zc_u][zc_c]") + ";");
      w_.close();
    }
    w_.close();
    w_.close();
    w_.close();
    w_.open("else");
  }
  w_.line("#pragma unroll 4");
  w_.open("for (idx_t zc_k = zc_lane; zc_k < " + K + "; zc_k += 32)");
  w_.line("const " + T + " zc_bk = " + elem(bdt, "zc_b[zc_k]") + ";");
  for (int64_t i = 0; i < d.M; ++i) {
    w_.line("acc[" + str(i) + "] += " + elem(adt, "zc_a" + str(i) + "[zc_k]") + " * zc_bk;");
  }
  w_.close();
  if (v > 1) w_.close();
  w_.line("#pragma unroll");
  w_.open("for (int zc_i = 0; zc_i < " + M + "; ++zc_i)");
  w_.line("#pragma unroll");
  w_.line(
      "for (int zc_o = 16; zc_o > 0; zc_o >>= 1) acc[zc_i] += __shfl_xor_sync(0xffffffffu, "
      "acc[zc_i], zc_o);");
  w_.close();
  w_.open("if (zc_lane == 0)");
  for (int64_t i = 0; i < d.M; ++i) {
    w_.open("");
    w_.line("const idx_t zc_m = " + str(i) + ";");
    Names names = mi.c(batch, "zc_m", "zc_n");
    const std::string reg = "v" + std::to_string(C);
    w_.line(T + " " + reg + " = acc[" + str(i) + "];");
    const std::string round = round_to_storage(cdt, reg);
    if (!round.empty()) w_.line(round);
    for (int32_t idx : k.nodes) {
      if (idx != k.anchor) emit_node(idx, names);
    }
    for (ValueId st : k.stores) w_.line(store(st, names, "v" + std::to_string(st)));
    w_.close();
  }
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
