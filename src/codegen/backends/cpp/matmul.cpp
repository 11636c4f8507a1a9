// Matmul kernels with their elementwise epilogue. Small products run an inline dot-product
// loop (a BLAS call would cost more than the arithmetic); large ones call BLAS through the
// runtime's services, then run the epilogue over the result in memory.
#include <algorithm>

#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/backends/cpp/library_matmul.h"
#include "codegen/c_expr.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "util/check.h"

namespace zc::codegen::cpp {

using ir::ValueId;

namespace {

// The most rows of an inline product of at most 16 columns kept in registers (one zc_vf16
// each): 12 leaves room for B's row and the A values among AVX-512's 32 vector registers. On a
// CPU without AVX-512 a row takes two of its 16 (the prelude's zc_vf16 of parts) and rows past
// 7 spill to the stack, which is the tile in memory they replace; more rows than 12 take that
// tile.
constexpr int64_t kRegisterRows = 12;

}  // namespace

void KernelEmitter::emit_matmul(const Kernel& k) {
  const ir::Node& n = s_.graph.nodes[k.anchor];
  ValueId A = n.inputs[0], B = n.inputs[1], C = n.outputs[0];
  const Shape& as = s_.graph.meta(A).shape;
  const Shape& bs = s_.graph.meta(B).shape;
  const Shape& cs = k.space;
  DType ct_d = s_.graph.meta(C).dtype;
  std::string ct = compute_type(ct_d);
  const MatmulIndex mi = matmul_index(as, bs);
  const ops::MatmulShapes& d = mi.d;
  if (shape_numel(cs) == 0) return;
  size_t nb = d.batch.size();
  const std::optional<LibraryCall> call = library_call(s_, k);
  // Code that serves many sizes keeps no size-dependent local arrays.
  const bool any_size = varies(A) || varies(B) || varies(C);

  if (call) {
    library_output_ = C;
    const cpu::GemmProblem& p = call->problem;
    const Shape& bshape = call->batch;
    std::string gemm = ct_d == DType::f32 ? "sgemm" : "dgemm";
    auto addr = [&](ValueId v, const Names& idx) { return "&" + element_ref(v, idx); };
    auto a_at = [&](const Names& b) { return addr(A, mi.a(b, "0", "0")); };
    auto b_at = [&](const Names& b) { return addr(B, mi.b(b, "0", "0")); };
    auto c_at = [&](const Names& b) { return addr(C, mi.c(b, "0", "0")); };
    // The kernel's index picks its choice (max_autotune; 0 otherwise), so the source is the
    // same tuned or not.
    const std::string site = std::to_string(kernel_);
    const std::string shape = std::string(p.ta ? "1" : "0") + ", " + (p.tb ? "1" : "0") + ", " +
                              num(p.m) + ", " + num(p.n) + ", " + num(p.k);
    const std::string head = "a->gemm[" + site + "], " + shape;
    const Names first(nb, "0");
    std::string operands = a_at(first) + ", " + num(p.lda) + ", " + b_at(first) + ", " +
                           num(p.ldb) + ", " + c_at(first) + ", " + num(p.ldc);
    // A batch of products (attention's heads) is one call: the runtime decides how to share it
    // among threads (cpu/blas.h). Each batch dim is passed as its count and, per operand, the
    // distance between its products at index 1 and 0 along that dim.
    std::vector<std::string> dims;
    for (size_t x = 0; x < nb; ++x) {
      if (bshape[x] <= 1) continue;
      Names one = first;
      one[x] = "1";
      dims.push_back(num(bshape[x]) + ", " + a_at(one) + " - " + a_at(first) + ", " + b_at(one) +
                     " - " + b_at(first) + ", " + c_at(one) + " - " + c_at(first));
    }
    const auto fused =
        ct_d == DType::f32 && dims.empty() ? fused_epilogue(s_, k, *call) : std::nullopt;
    if (fused && k.nodes.size() > 1) {
      // The call writes the epilogue's value itself (oneDNN's bias and post-ops): no loop over
      // the product in memory after it.
      const FusedEpilogue& f = *fused;
      auto origin = [&](ValueId v) { return addr(v, Names(s_.graph.meta(v).shape.size(), "0")); };
      const std::string out = origin(f.out) + ", " + num(f.ldo);
      const std::string in =
          a_at(first) + ", " + num(p.lda) + ", " + b_at(first) + ", " + num(p.ldb) + ", " + out;
      w_.open("");
      w_.line("const ZcEpilogue e = {" + (f.bias >= 0 ? origin(f.bias) : std::string("0")) + ", " +
              (f.residual >= 0 ? origin(f.residual) : std::string("0")) + ", " + num(f.ldr) + ", " +
              std::to_string(static_cast<int>(f.act)) + "};");
      w_.line("a->svc->sgemm_x(a, " + site + ", " + shape + ", " + in + ", &e);");
      w_.close();
      return;
    }
    if (ct_d == DType::f32 && dims.empty()) {
      // The runtime runs it as the kernel's choice says (a B kept packed among them).
      w_.line("a->svc->sgemm_x(a, " + site + ", " + shape + ", " + operands + ", 0);");
    } else if (dims.empty()) {
      w_.line("a->svc->" + gemm + "(" + head + ", " + operands + ");");
    } else {
      std::string list = std::to_string(dims.size());
      for (const std::string& x : dims) list += ", " + x;
      w_.open("");
      w_.line("const int64_t batch[] = {" + list + "};");
      w_.line("a->svc->" + gemm + "_batch(" + head + ", " + operands + ", batch);");
      w_.close();
    }
    if (k.nodes.size() > 1) {  // the epilogue, over the product in memory
      int eo = 0;
      Names names = open_loops(cs, "i", Share::outer, &eo, any_size);
      for (int32_t idx : k.nodes) {
        if (idx != k.anchor) emit_node(idx, names);
      }
      for (ValueId v : k.stores) {
        if (v != C) w_.line(store(v, names, "v" + std::to_string(v)));
      }
      close_loops(eo);
    }
    return;
  }

  // Inline. Each row of C is accumulated in a local buffer first (in i-k-j order when B is
  // row-major, the order of the eager small-matrix kernel, else as dot products), then the
  // epilogue runs over the row as a separate loop, which the compiler vectorizes.
  std::string T = ct;
  if (d.b_vec || d.N > 16384 || any_size) {
    int opened = 0;
    Names names = open_loops(cs, "i", Share::outer, &opened, any_size);
    Names bn(names.begin(), names.begin() + nb);
    std::string i = d.a_vec ? "0" : names[nb];
    std::string j = d.b_vec ? "0" : names[nb + (d.a_vec ? 0 : 1)];
    w_.line(T + " acc = 0;");
    w_.line("#pragma omp simd reduction(+:acc)");
    w_.open("for (int64_t kk = 0; kk < " + num(d.K) + "; ++kk)");
    w_.line("acc += (" + T + ")" + load(A, mi.a(bn, i, "kk")) + " * (" + T + ")" +
            load(B, mi.b(bn, "kk", j)) + ";");
    w_.close();
    emit_epilogue(k, C, names, "acc");
    close_loops(opened);
    return;
  }
  // B is first copied (except where rows stay in registers, below) into a local block [K][NP]
  // with rows padded to whole vectors (NP, a multiple of 16) and zeros in the padding, so the
  // accumulation is a remainder-free unit-stride FMA over j whatever B's layout (a Linear's W^T
  // included). Rows accumulate into a local tile; the epilogue then runs over the real columns.
  // Measured on seed64's 10x10 products this is 1.5-2x faster than dot products or unpadded
  // rows. Inline products are small, so they run on the calling thread.
  int64_t NP = (d.N + 15) / 16 * 16;
  std::string N = std::to_string(d.N), K = std::to_string(d.K), P = std::to_string(NP);
  bool whole_tile = d.M * NP <= 8192;
  int batch_opened = 0;
  Names batch = open_loops(d.batch, "b", Share::none, &batch_opened);
  const int64_t rows = d.a_vec ? 1 : d.M;  // of C
  const bool in_registers = T == "float" && NP == 16 && rows <= kRegisterRows;
  if (!in_registers) {
    w_.line(T + " bt[" + std::to_string(d.K * NP) + "];");
    w_.line("for (int64_t e = 0; e < " + std::to_string(d.K * NP) + "; ++e) bt[e] = 0;");
    w_.line("for (int64_t kk = 0; kk < " + K + "; ++kk)");
    w_.line("  for (int64_t j = 0; j < " + N + "; ++j) bt[kk * " + P + " + j] = (" + T + ")" +
            load(B, mi.b(batch, "kk", "j")) + ";");
  }
  std::string M = std::to_string(rows);
  auto accumulate_row = [&](const std::string& row, const std::string& i) {
    w_.line("for (int64_t j = 0; j < " + P + "; ++j) " + row + "[j] = 0;");
    w_.open("for (int64_t kk = 0; kk < " + K + "; ++kk)");
    w_.line(T + " av = (" + T + ")" + load(A, mi.a(batch, i, "kk")) + ";");
    w_.line("#pragma omp simd");
    w_.line("for (int64_t j = 0; j < " + P + "; ++j) " + row + "[j] += av * bt[kk * " + P +
            " + j];");
    w_.close();
  };
  Names full = batch;
  if (!d.a_vec) full.push_back(d.M > 1 ? "i" : "0");
  full.push_back("j");
  auto epilogue = [&](const std::string& value) {
    w_.line("#pragma omp simd");
    w_.open("for (int64_t j = 0; j < " + N + "; ++j)");
    emit_epilogue(k, C, full, value);
    w_.close();
  };
  std::string i = d.a_vec || d.M == 1 ? "0" : "i";
  if (in_registers) {
    // Every row in a register of 16 floats (zc_vf16) for the whole k loop: each k step is one
    // broadcast FMA per row with no load or store of the row, and the rows' FMAs are
    // independent. Through a tile in memory each update waited for the store of the last
    // (seed64's 10x10x10 products: 3.4x slower than this). B's row kk is built in a register
    // from its N elements, not copied into a padded block first: the vector load of a row
    // that scalar stores had just written waited for them to reach the cache, which held the
    // product back until the previous kernel's work had retired (seed64's kernels: 14.5 ->
    // 12.5 us here, 18.9 -> 18.0 on the GPU host's Xeon; docs/codegen.md). The loops over the
    // rows after it are ZC_ROW_LOOP (prelude.h): what vectorizes there is the columns.
    w_.line(T + " tile[" + std::to_string(rows * 16) + "];");
    w_.open("");
    std::string zero;
    // The rows are zc_row0..: "c0" is a constant's buffer (A or B may be one).
    for (int64_t r = 0; r < rows; ++r)
      zero += (r ? ", zc_row" : "zc_row") + std::to_string(r) + " = {}";
    w_.line("zc_vf16 " + zero + ";");
    w_.open("for (int64_t kk = 0; kk < " + K + "; ++kk)");
    std::string elems;
    for (int64_t j = 0; j < d.N; ++j) {
      elems +=
          (j ? ", " : "") + std::string("(float)") + load(B, mi.b(batch, "kk", std::to_string(j)));
    }
    w_.line("const zc_vf16 b = {" + elems + "};  // the padding lanes are zero");
    for (int64_t r = 0; r < rows; ++r) {
      const std::string row = std::to_string(r);
      w_.line("zc_row" + row + " += (" + T + ")" + load(A, mi.a(batch, row, "kk")) + " * b;");
    }
    w_.close();
    for (int64_t r = 0; r < rows; ++r) {
      w_.line("memcpy(tile + " + std::to_string(r * 16) + ", &zc_row" + std::to_string(r) +
              ", sizeof zc_row" + std::to_string(r) + ");");
    }
    w_.close();
    const std::vector<int32_t> tail = costly_unary_tail(k, C);
    if (tail.empty()) {
      w_.line("ZC_ROW_LOOP");
      w_.open("for (int64_t i = 0; i < " + M + "; ++i)");
      epilogue("tile[i * 16 + j]");
      w_.close();
    } else {
      // The epilogue's costly unary tail (a sigmoid, a GELU) runs over the M x N values as one
      // flat loop: over rows of 16 lanes it was computed for 16 lanes where N are used, or for
      // N % 8 of them one at a time, each a scalar exp with branches (seed64's sigmoid: 10% of
      // its kernels on the GPU host's Xeon). What comes before it runs over the rows.
      const int32_t first = tail.front();
      const ValueId into = s_.graph.nodes[first].inputs[0];
      const ValueId last = s_.graph.nodes[tail.back()].outputs[0];
      const std::string MN = std::to_string(rows * d.N);
      w_.line(T + " mid[" + MN + "];");
      w_.line("ZC_ROW_LOOP");
      w_.open("for (int64_t i = 0; i < " + M + "; ++i)");
      w_.line("#pragma omp simd");
      w_.open("for (int64_t j = 0; j < " + N + "; ++j)");
      emit_epilogue(k, C, full, "tile[i * 16 + j]", first, last);
      w_.line("mid[i * " + N + " + j] = v" + std::to_string(into) + ";");
      w_.close();
      w_.close();
      w_.line("#pragma omp simd");
      w_.open("for (int64_t e = 0; e < " + MN + "; ++e)");
      w_.line(T + " v" + std::to_string(into) + " = mid[e];");
      for (int32_t idx : tail) emit_node(idx, full);
      w_.line("mid[e] = v" + std::to_string(last) + ";");
      w_.close();
      w_.line("ZC_ROW_LOOP");
      w_.open("for (int64_t i = 0; i < " + M + "; ++i)");
      w_.line("#pragma omp simd");
      w_.line("for (int64_t j = 0; j < " + N + "; ++j) " +
              store(last, full, "mid[i * " + N + " + j]"));
      w_.close();
    }
  } else if (whole_tile) {
    // k outermost: consecutive updates go to different rows, so they do not wait on each
    // other (row by row, each row's k-th update waited for its (k-1)-th through memory,
    // which made seed64's 10x10x10 products latency-bound: 4x slower).
    std::string tile_size = std::to_string(rows * NP);
    w_.line(T + " tile[" + tile_size + "];");
    w_.line("for (int64_t e = 0; e < " + tile_size + "; ++e) tile[e] = 0;");
    w_.open("for (int64_t kk = 0; kk < " + K + "; ++kk)");
    w_.open("for (int64_t i = 0; i < " + M + "; ++i)");
    w_.line(T + " av = (" + T + ")" + load(A, mi.a(batch, i, "kk")) + ";");
    w_.line("#pragma omp simd");
    w_.line("for (int64_t j = 0; j < " + P + "; ++j) tile[i * " + P + " + j] += av * bt[kk * " + P +
            " + j];");
    w_.close();
    w_.close();
    w_.open("for (int64_t i = 0; i < " + M + "; ++i)");
    epilogue("tile[i * " + P + " + j]");
    w_.close();
  } else {
    w_.open("for (int64_t i = 0; i < " + M + "; ++i)");
    w_.line(T + " row[" + P + "];");
    accumulate_row("row", i);
    epilogue("row[j]");
    w_.close();
  }
  close_loops(batch_opened);
}

std::vector<int32_t> KernelEmitter::costly_unary_tail(const Kernel& k, ir::ValueId C) const {
  std::vector<int32_t> epilogue;
  for (int32_t idx : k.nodes) {
    if (idx != k.anchor) epilogue.push_back(idx);
  }
  // From the end: unary float ops, each reading the one before it (the first may read C), of
  // which only the last is stored.
  std::vector<int32_t> tail;
  bool costly = false;
  for (size_t at = epilogue.size(); at-- > 0;) {
    const ir::Node& n = s_.graph.nodes[epilogue[at]];
    const ValueId before = at ? s_.graph.nodes[epilogue[at - 1]].outputs[0] : C;
    const ValueId out = n.outputs[0];
    const bool last = tail.empty();
    if (ops::op_def(n.op).cls != ops::OpClass::unary || n.inputs.size() != 1 ||
        n.inputs[0] != before || compute_type(s_.graph.meta(out).dtype) != "float" ||
        s_.graph.meta(out).shape != s_.graph.meta(C).shape ||
        (!last && std::count(k.stores.begin(), k.stores.end(), out)))
      break;
    tail.insert(tail.begin(), epilogue[at]);
    costly = costly || ops::op_def(n.op).transcendental;
  }
  if (!costly || tail.empty() ||
      std::count(k.stores.begin(), k.stores.end(), s_.graph.nodes[tail.back()].outputs[0]) == 0)
    return {};
  return tail;
}

void KernelEmitter::emit_epilogue(const Kernel& k, ir::ValueId C, const Names& names,
                                  const std::string& value, int32_t stop_at,
                                  ir::ValueId not_stored) {
  DType ct_d = s_.graph.meta(C).dtype;
  std::string reg = "v" + std::to_string(C);
  w_.line(compute_type(ct_d) + " " + reg + " = " + value + ";");
  std::string round = round_to_storage(ct_d, reg);
  if (!round.empty()) w_.line(round);
  for (int32_t idx : k.nodes) {
    if (idx == stop_at) break;
    if (idx != k.anchor) emit_node(idx, names);
  }
  for (ir::ValueId v : k.stores) {
    if (v != not_stored) w_.line(store(v, names, "v" + std::to_string(v)));
  }
}

}  // namespace zc::codegen::cpp
