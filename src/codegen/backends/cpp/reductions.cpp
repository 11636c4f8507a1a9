// Row reductions on the CPU: the rows are a loop nest, shared out among threads when they are
// worth a team, and each reduction of a row is a pass over its elements in a block of its own.
#include "codegen/backends/cpp/kernel_emitter.h"
#include "codegen/c_expr.h"

namespace zc::codegen::cpp {

using ops::OpId;

namespace {

// A floating max (min) ignores NaNs, so that it vectorizes, and keeps flags beside it instead.
bool flagged(OpId op, DType type) {
  return (op == OpId::amax || op == OpId::amin) && is_floating(type);
}

}  // namespace

std::optional<KernelEmitter::Names> KernelEmitter::open_rows(const Kernel& k, const Shape& outer,
                                                             const Shape& inner) {
  if (shape_numel(outer) == 0) return std::nullopt;
  // Rows are shared out, every row loop of them (a row's own loops run on one thread), when
  // all rows together are worth a thread team.
  int opened = 0;
  Names row = open_loops(outer, "i", Share::all, &opened, s_.varies(k), shape_numel(inner));
  scopes_.push_back(opened);
  return row;
}

void KernelEmitter::declare_accumulator(const Reduction& r) {
  const std::string ct = compute_type(r.type), id = std::to_string(r.out);
  if (r.op == OpId::sum) {
    // Floating sums accumulate in double, integer sums in int64, as the eager kernel does.
    w_.line(std::string(is_floating(r.type) ? "double " : "int64_t ") + r.acc + " = 0;");
  } else if (flagged(r.op, r.type)) {
    // A NaN anywhere makes the result NaN, as in torch: kept as a flag beside a max (min)
    // that ignores NaNs, so that both vectorize. A second flag says whether every element
    // was the start value (-inf for a max): Clang starts OpenMP's max reduction from the
    // lowest finite float (GCC from -inf), which a row of -infs then gave as its max.
    w_.line(ct + " " + r.acc + " = " + (r.op == OpId::amax ? "-" : "") + "INFINITY;");
    w_.line("int nan" + id + " = 0, inf" + id + " = 1;");
  } else {
    w_.line(ct + " " + r.acc + " = 0;");
    w_.line("int64_t pos" + id + " = 0, at" + id + " = 0;");
  }
}

KernelEmitter::Names KernelEmitter::open_pass(const Shape& inner, const Reduction* r) {
  // `omp simd` lets the compiler keep one partial result per vector lane (and flags, for a
  // floating max or min); the other reductions pick a position and stay scalar.
  std::string simd;
  if (r && r->op == OpId::sum) {
    simd = "#pragma omp simd reduction(+:" + r->acc + ")";
  } else if (r && flagged(r->op, r->type)) {
    const std::string id = std::to_string(r->out);
    simd = std::string("#pragma omp simd reduction(") + (r->op == OpId::amax ? "max" : "min") +
           ":" + r->acc + ") reduction(|:nan" + id + ") reduction(&:inf" + id + ")";
  }
  // A block of its own, so element values of one pass never collide with another pass's,
  // also when the reduced dims have size 1 and no loop is opened.
  w_.open("");
  int loops = 0;
  for (int64_t d : inner) loops += d > 1;
  if (loops > 0 && !simd.empty()) {
    w_.line(simd + (loops > 1 ? " collapse(" + std::to_string(loops) + ")" : ""));
  }
  int opened = 0;
  Names in = open_loops(inner, "r", Share::none, &opened);
  scopes_.push_back(opened + 1);
  return in;
}

void KernelEmitter::accumulate(const Reduction& r, const std::string& x) {
  const std::string ct = compute_type(r.type), id = std::to_string(r.out);
  if (r.op == OpId::sum) {
    w_.line(r.acc + " += " + x + ";");
  } else if (flagged(r.op, r.type)) {
    w_.line(ct + " x = " + x + ";");
    w_.line("nan" + id + " |= x != x;");
    w_.line("inf" + id + " &= x == " + (r.op == OpId::amax ? "-" : "") + "INFINITY;");
    w_.line(r.acc + " = x " + (r.op == OpId::amax ? ">" : "<") + " " + r.acc + " ? x : " + r.acc +
            ";");
  } else {
    w_.line(ct + " x = " + x + ";");
    // The first element starts the accumulator; a NaN wins and stays, as in torch.
    const std::string better = r.op == OpId::amin ? "x < " + r.acc : "x > " + r.acc;
    const std::string p = "pos" + id;
    w_.open("if (" + p + " == 0 || (" + r.acc + " == " + r.acc + " && (x != x || " + better +
            ")))");
    w_.line(r.acc + " = x;");
    w_.line("at" + id + " = " + p + ";");
    w_.close();
    w_.line("++" + p + ";");
  }
}

std::string KernelEmitter::reduced(const Reduction& r) {
  const std::string id = std::to_string(r.out);
  if (flagged(r.op, r.type)) {
    w_.line("if (inf" + id + ") " + r.acc + " = " + (r.op == OpId::amax ? "-" : "") + "INFINITY;");
    w_.line("if (nan" + id + ") " + r.acc + " = NAN;");
  }
  return r.op == OpId::argmax ? "at" + id : r.acc;
}

}  // namespace zc::codegen::cpp
