// Attention as one kernel on the CPU: softmax(q k^T * scale [causal] [mask]) v with no [Tq, Tk]
// scores in memory, only blocks of them the size of a core's cache. A mask (ops/attention.cpp)
// is read where each score is scaled: a boolean one sets the unseen keys' scores to -inf, a
// floating one is added.
//
// Work items are (batch item, block of kQueryRows query rows), shared among the team (dynamic:
// causal blocks differ in work). A thread takes the keys of its item kKeyBlock at a time:
// S = Q_blk K_blk^T through the runtime's BLAS service on one thread (a block is too small to
// split), then for each row the scale, the causal limit, the running maximum and the
// exponentials, written over S in place (loops the compiler vectorizes, with the prelude's
// zc_exp), then PV = S V_blk through BLAS again, and the row's accumulator is rescaled by how
// much its maximum grew and PV added (the online softmax of FlashAttention). The output is the
// accumulator over the row's sum. A causal block stops at the last key its last row sees.
//
// The blocks' products read q, k and v where they are when their layout is one BLAS takes and
// their storage is the compute type (the usual case: q, k, v are strided views of one QKV
// product); otherwise the kernel first copies the block into its scratch through ordinary
// loads, which convert and follow any strides. Numerics are the eager kernel's
// (ops/attention.cpp): scale after the product, sums in the compute type, a row that sees no
// key gives zeros.
//
// attention_lse (each query row's log-sum-exp of scaled scores, which the backward reads) is
// the same kernel without V: the running maximum and sum, then max + log(sum) (-inf for a row
// that sees no key).
#include <algorithm>

#include "codegen/backends/cpp/abi.h"
#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/backends/cpp/library_matmul.h"
#include "codegen/c_expr.h"
#include "cpu/gemm_choice.h"
#include "ops/eager.h"
#include "util/check.h"

namespace zc::codegen::cpp {

using ir::ValueId;

namespace {

constexpr int64_t kQueryRows = 64;  // rows of a work item
constexpr int64_t kKeyBlock = 256;  // keys per step: S is at most 64 KB of floats

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

void KernelEmitter::emit_attention(const Kernel& k) {
  const AttentionOperands at = attention_operands(k);
  const bool lse = at.op == ops::OpId::attention_lse;
  ZC_CHECK(
      lse || at.op == ops::OpId::attention,
      << "the C++ backend generates attention and attention_lse, not " << ops::op_def(at.op).name);
  if (shape_numel(at.os) == 0) return;
  const DType cdt = ops::compute_dtype(at.odt);
  const std::string T = compute_type(cdt);
  const std::string gemm = cdt == DType::f64 ? "dgemm" : "sgemm";
  const bool any_size =
      varies(at.Q) || varies(at.K) || varies(at.V) || varies(at.O) || (at.M >= 0 && varies(at.M));
  // Block sizes: constants, smaller for a short sequence of one size.
  const int64_t R = any_size ? kQueryRows : std::min(kQueryRows, at.tq);
  const int64_t KB = any_size ? kKeyBlock : std::max<int64_t>(1, std::min(kKeyBlock, at.tk));
  const std::string TQ = num(at.tq), TK = num(at.tk), D = num(at.d), DV = num(at.dv);
  const std::string one_thread = str(cpu::GemmChoice{.shift = cpu::GemmChoice::kOneThread}.code());

  // Each operand read in place (pointer, leading dim, transposed) or through a staged copy.
  struct Operand {
    ValueId v;
    int64_t rows, cols;
    bool direct = false, trans = false;
    int64_t ld = 0;
  };
  auto operand = [&](ValueId v, int64_t rows, int64_t cols) {
    Operand o{v, rows, cols};
    const DType stored = s_.graph.meta(s_.base_of(v)).dtype;
    o.direct = stored == cdt && blas_layout(s_.at(v).view.strides, rows, cols, &o.trans, &o.ld);
    return o;
  };
  const Operand q = operand(at.Q, at.tq, at.d), kk = operand(at.K, at.tk, at.d);
  const Operand v = lse ? Operand{-1, 0, 0, true} : operand(at.V, at.tk, at.dv);

  // Batch indices, decoded from the work item's number.
  Names b(at.batch.size(), "0");
  for (size_t x = 0; x < at.batch.size(); ++x) {
    if (at.batch[x] > 1) b[x] = "b" + str(static_cast<int64_t>(x));
  }
  // Sizes go through num() as polynomials in the symbols (size_template.h): the division that
  // counts blocks is written out.
  const std::string blocks = "((" + TQ + " + " + str(R - 1) + ") / " + str(R) + ")";
  const std::string items = num(shape_numel(at.batch)) + " * " + blocks;
  const std::string work = num(shape_numel(at.batch) * at.tq * at.tk * (at.d + at.dv));

  // Scratch per thread: the accumulator, S, PV, the row factors, and staged blocks.
  std::string scratch = num(R * at.dv) + " * 2 + " + str(R * KB + 3 * R);
  if (!q.direct) scratch += " + " + num(R * at.d);
  if (!kk.direct) scratch += " + " + num(KB * at.d);
  if (!lse && !v.direct) scratch += " + " + num(KB * at.dv);

  // The region is a lambda that a small attention calls on this thread and a large one in an
  // OpenMP team, not `omp parallel if(...)`, which enters libgomp even when false (see
  // KernelEmitter::open_loops); its `omp for` binds to the team when there is one.
  w_.line("int zc_failed = 0;");
  w_.open("auto zc_region = [&]() __attribute__((noinline))");
  w_.line(T + "* zc_scratch = (" + T + "*)malloc(sizeof(" + T + ") * (" + scratch + "));");
  w_.line("if (!zc_scratch) {");
  w_.line("#pragma omp atomic write");
  w_.line("  zc_failed = 1;");
  w_.line("}");
  w_.line("#pragma omp for schedule(dynamic, 1)");
  w_.open("for (int64_t zc_w = 0; zc_w < " + items + "; ++zc_w)");
  w_.line("if (!zc_scratch) continue;");
  w_.line("int64_t zc_rest = zc_w / " + blocks + ";");
  for (size_t x = at.batch.size(); x-- > 0;) {
    if (b[x] == "0") continue;
    w_.line("const int64_t " + b[x] + " = zc_rest % " + num(at.batch[x]) + ";");
    w_.line("zc_rest /= " + num(at.batch[x]) + ";");
  }
  w_.line("const int64_t zc_r0 = (zc_w % " + blocks + ") * " + str(R) + ";");
  w_.line("const int64_t zc_rows = " + TQ + " - zc_r0 < " + str(R) + " ? " + TQ +
          " - zc_r0 : " + str(R) + ";");
  w_.line("const int64_t zc_keys = " +
          (at.a.causal ? "zc_r0 + zc_rows < " + TK + " ? zc_r0 + zc_rows : " + TK : TK) + ";");
  w_.line(T + "* zc_acc = zc_scratch;");
  w_.line(T + "* zc_pv = zc_acc + " + num(R * at.dv) + ";");
  w_.line(T + "* zc_s = zc_pv + " + num(R * at.dv) + ";");
  w_.line(T + "* zc_m = zc_s + " + str(R * KB) + ";");
  w_.line(T + "* zc_l = zc_m + " + str(R) + ";");
  w_.line(T + "* zc_c = zc_l + " + str(R) + ";");
  std::string next = "zc_c + " + str(R);
  auto stage_area = [&](const Operand& o, const std::string& name, int64_t elems) {
    if (o.direct) return;
    w_.line(T + "* " + name + " = " + next + ";");
    next = name + " + " + num(elems);
  };
  stage_area(q, "zc_qs", R * at.d);
  stage_area(kk, "zc_ks", KB * at.d);
  if (!lse) stage_area(v, "zc_vs", KB * at.dv);
  w_.open("for (int64_t zc_i = 0; zc_i < zc_rows; ++zc_i)");
  w_.line("zc_m[zc_i] = -INFINITY;");
  w_.line("zc_l[zc_i] = 0;");
  w_.line("for (int64_t zc_j = 0; zc_j < " + DV + "; ++zc_j) zc_acc[zc_i * " + DV +
          " + zc_j] = 0;");
  w_.close();

  // A block of `rows` rows of operand o from row `first`: the pointer, leading dim and
  // transposition BLAS reads it with; a staged block is copied first, row-major.
  auto block = [&](const Operand& o, const Shape& shape, const std::string& staged,
                   const std::string& first, const std::string& rows, const std::string& cols,
                   std::string* ptr, std::string* ld, bool* trans) {
    if (o.direct) {
      *ptr = "&" + element_ref(o.v, at.names(shape, b, first, "0"));
      *ld = num(o.ld);
      *trans = o.trans;
      return;
    }
    w_.open("for (int64_t zc_i = 0; zc_i < " + rows + "; ++zc_i)");
    w_.line("for (int64_t zc_j = 0; zc_j < " + cols + "; ++zc_j) " + staged + "[zc_i * " + cols +
            " + zc_j] = " + load(o.v, at.names(shape, b, "(" + first + " + zc_i)", "zc_j")) + ";");
    w_.close();
    *ptr = staged;
    *ld = cols;
    *trans = false;
  };
  std::string qp, ldq, kp, ldk, vp, ldv;
  bool tq = false, tk = false, tv = false;
  block(q, at.qs, "zc_qs", "zc_r0", "zc_rows", D, &qp, &ldq, &tq);

  w_.open("for (int64_t zc_k0 = 0; zc_k0 < zc_keys; zc_k0 += " + str(KB) + ")");
  w_.line("const int64_t zc_n = zc_keys - zc_k0 < " + str(KB) + " ? zc_keys - zc_k0 : " + str(KB) +
          ";");
  block(kk, at.ks, "zc_ks", "zc_k0", "zc_n", D, &kp, &ldk, &tk);
  // S = Q K^T: K as BLAS's B is K transposed.
  w_.line("a->svc->" + gemm + "(" + one_thread + ", " + (tq ? "1" : "0") + ", " + (tk ? "0" : "1") +
          ", zc_rows, zc_n, " + D + ", " + qp + ", " + ldq + ", " + kp + ", " + ldk + ", zc_s, " +
          str(KB) + ");");
  w_.open("for (int64_t zc_i = 0; zc_i < zc_rows; ++zc_i)");
  w_.line(T + "* __restrict zc_row = zc_s + zc_i * " + str(KB) + ";");
  if (at.a.causal) {
    // Row zc_r0 + zc_i sees keys up to its own position (top-left aligned, as torch).
    w_.line("int64_t zc_seen = zc_r0 + zc_i + 1 - zc_k0;");
    w_.line("zc_seen = zc_seen < 0 ? 0 : (zc_seen > zc_n ? zc_n : zc_seen);");
  } else {
    w_.line("const int64_t zc_seen = zc_n;");
  }
  // The loops run over the block's every key, a causal row's unseen ones at -inf (exp gives
  // 0): a trip count that differs from row to row left each row a scalar remainder of
  // exponentials. A row that sees no key here keeps its state (its maximum may still be -inf).
  w_.open("if (zc_seen == 0)");
  w_.line("for (int64_t zc_j = 0; zc_j < zc_n; ++zc_j) zc_row[zc_j] = 0;");
  if (!lse) w_.line("zc_c[zc_i] = 1;");
  w_.line("continue;");
  w_.close();
  w_.line(T + " zc_mx = zc_m[zc_i];");
  w_.line("#pragma omp simd reduction(max:zc_mx)");
  w_.open("for (int64_t zc_j = 0; zc_j < zc_n; ++zc_j)");
  std::string seen = "zc_j < zc_seen", score = "zc_row[zc_j] * " + literal(at.a.scale, cdt);
  apply_attention_mask(at, b, "(zc_r0 + zc_i)", "(zc_k0 + zc_j)", T, seen, score);
  w_.line(T + " zc_x = " + seen + " ? " + score + " : -INFINITY;");
  w_.line("zc_row[zc_j] = zc_x;");
  w_.line("zc_mx = zc_x > zc_mx ? zc_x : zc_mx;");
  w_.close();
  if (at.M >= 0) {
    // A row the mask has shown no key yet keeps its state, as an unseen causal block does.
    w_.open("if (zc_mx == -INFINITY)");
    w_.line("for (int64_t zc_j = 0; zc_j < zc_n; ++zc_j) zc_row[zc_j] = 0;");
    w_.line("zc_c[zc_i] = 1;");
    w_.line("continue;");
    w_.close();
  }
  w_.line(T + " zc_sum = 0;");
  w_.line("#pragma omp simd reduction(+:zc_sum)");
  w_.open("for (int64_t zc_j = 0; zc_j < zc_n; ++zc_j)");
  w_.line(T + " zc_p = zc_exp(zc_row[zc_j] - zc_mx);");
  w_.line("zc_row[zc_j] = zc_p;");
  w_.line("zc_sum += zc_p;");
  w_.close();
  // The factor rescales the sum here, and the accumulator after PV (attention only).
  w_.line("const " + T + " zc_f = zc_exp(zc_m[zc_i] - zc_mx);");
  w_.line("zc_l[zc_i] = zc_l[zc_i] * zc_f + zc_sum;");
  if (!lse) w_.line("zc_c[zc_i] = zc_f;");
  w_.line("zc_m[zc_i] = zc_mx;");
  w_.close();
  if (!lse) {
    // PV = P V_blk, and each row's accumulator rescaled by how far its maximum grew.
    block(v, at.vs, "zc_vs", "zc_k0", "zc_n", DV, &vp, &ldv, &tv);
    w_.line("a->svc->" + gemm + "(" + one_thread + ", 0, " + (tv ? "1" : "0") + ", zc_rows, " + DV +
            ", zc_n, zc_s, " + str(KB) + ", " + vp + ", " + ldv + ", zc_pv, " + DV + ");");
    w_.open("for (int64_t zc_i = 0; zc_i < zc_rows; ++zc_i)");
    w_.line("const " + T + " zc_f = zc_c[zc_i];");
    w_.line("#pragma omp simd");
    w_.line("for (int64_t zc_j = 0; zc_j < " + DV + "; ++zc_j) zc_acc[zc_i * " + DV +
            " + zc_j] = zc_acc[zc_i * " + DV + " + zc_j] * zc_f + zc_pv[zc_i * " + DV +
            " + zc_j];");
    w_.close();
  }
  w_.close();  // key blocks

  w_.open("for (int64_t zc_i = 0; zc_i < zc_rows; ++zc_i)");
  if (lse) {
    w_.line(T + " zc_o = zc_m[zc_i] + zc_log(zc_l[zc_i]);");
    w_.line(store(at.O, at.row_names(at.os, b, "(zc_r0 + zc_i)"), "zc_o"));
  } else {
    w_.line("const " + T + " zc_inv = zc_l[zc_i] != 0 ? (" + T + ")1 / zc_l[zc_i] : (" + T + ")0;");
    w_.open("for (int64_t zc_j = 0; zc_j < " + DV + "; ++zc_j)");
    w_.line(T + " zc_o = zc_acc[zc_i * " + DV + " + zc_j] * zc_inv;");
    w_.line(store(at.O, at.names(at.os, b, "(zc_r0 + zc_i)", "zc_j"), "zc_o"));
    w_.close();
  }
  w_.close();
  w_.close();  // work items
  w_.line("free(zc_scratch);");
  w_.close(";");  // the region
  w_.line("if (" + work + " < " + str(opt_.parallel_threshold) + ") zc_region();");
  w_.open("else");
  w_.line("#pragma omp parallel");
  w_.line("zc_region();");
  w_.close();
  w_.line("if (zc_failed) return " + str(kErrNoMemory) + ";");
}

}  // namespace zc::codegen::cpp
