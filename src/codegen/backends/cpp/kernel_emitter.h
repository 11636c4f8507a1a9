// KernelEmitter: writes the C++ function of one kernel. Shared by the per-kind emitters;
// internal to the C++ backend.
#pragma once

#include <string>
#include <vector>

#include "codegen/backends/cpp/emit.h"
#include "codegen/c_expr.h"
#include "codegen/c_like_emitter.h"

namespace zc::codegen::cpp {

class KernelEmitter final : private CLikeEmitter {
 public:
  KernelEmitter(const Schedule& s, const BufferPlan& plan, const EmitOptions& options,
                CodeWriter& out)
      : CLikeEmitter(s, plan), opt_(options), out_(out) {}

  // Writes `extern "C" int <name>(const ZcArgs* a) { ... }` for kernel k.
  void emit(int32_t k, const std::string& name);
  // The sizes recorded so far, for a schedule whose sizes vary (size_template.h).
  std::vector<int64_t> take_sizes() { return sizes_.take(); }

 private:
  void emit_pointwise(const Kernel& k);
  void emit_matmul(const Kernel& k);
  // The matmul result `value` at C's index `names`, then the epilogue nodes and the stores:
  // the nodes before node `stop_at` only, and every store but `not_stored`, when given (an
  // inline product's flat tail runs the rest).
  void emit_epilogue(const Kernel& k, ir::ValueId C, const Names& names, const std::string& value,
                     int32_t stop_at = -1, ir::ValueId not_stored = -1);
  // The end of matmul kernel k's epilogue that an inline product runs as one flat loop: unary
  // float ops in a chain from the last node that reads anything else (or from C), of which only
  // the last is stored, with at least one transcendental among them. Empty when there is none.
  std::vector<int32_t> costly_unary_tail(const Kernel& k, ir::ValueId C) const;
  void emit_copy(const Kernel& k);
  void emit_gather(const Kernel& k);
  void emit_attention(const Kernel& k);  // attention.cpp

  // Which loops of a nest OpenMP shares out among its threads.
  enum class Share {
    none,
    outer,  // all but the innermost, which stays whole so that it vectorizes
    all,    // every loop: the innermost loop's body is itself a loop (a row, a product)
  };
  // Loops over `shape` (size-1 dims get no loop), shared out when the nest's work, its numel
  // times `work_per_iteration`, is large; returns the index names, and how many loops were
  // opened (close them with close_loops).
  //
  // When `varies` (sizes change from call to call) that choice is made at run time, and the
  // nest is a lambda over a range of its shared loops' flattened index, called once for the
  // whole range when the work is small and once per thread of an OpenMP team otherwise. Not
  // `omp parallel for if(...)`: that enters OpenMP's runtime even when the condition is false,
  // about 260 ns a nest (libgomp makes a team of one), which an unrolled GRU's per-step
  // kernels spent more on than on their arithmetic. Not the nest written twice, under `if`
  // and `else`: that doubled the compiler's work on the nest. The lambda is never inlined, so
  // its body is compiled once.
  Names open_loops(const Shape& shape, const std::string& prefix, Share share, int* opened,
                   bool varies = false, int64_t work_per_iteration = 1);
  void close_loops(int opened);
  // The lambda and flattened loop of a run-time-shared nest (see open_loops).
  void open_shared_nest(const Shape& shape, const std::string& prefix, int shared, int64_t work,
                        Names* names);
  // Closes what the innermost open hook opened.
  void close_scope();

  // A loop nest in a block of its own, shared out when large.
  Names open_elements(const Shape& shape, bool varies) override;
  void close_elements() override { close_scope(); }
  // Row reductions: the rows a loop nest shared out among threads, each pass a nest of its own
  // within one thread's row, with `omp simd` where its reduction has one.
  std::optional<Names> open_rows(const Kernel& k, const Shape& outer, const Shape& inner) override;
  void close_rows() override { close_scope(); }
  void declare_accumulator(const Reduction& r) override;
  Names open_pass(const Shape& inner, const Reduction* r) override;
  void close_pass() override { close_scope(); }
  void accumulate(const Reduction& r, const std::string& x) override;
  std::string reduced(const Reduction& r) override;
  std::string row_store_condition() const override { return ""; }

  // Each buffer a kernel touches is hoisted into a __restrict local at the top of the kernel:
  // the planner guarantees that a kernel's buffers do not overlap, and telling the compiler
  // so is what lets it vectorize loops that read one buffer and write another.
  std::string buffer(ir::ValueId base) const override;

  const EmitOptions& opt_;
  CodeWriter& out_;
  mutable std::vector<std::pair<std::string, std::string>> locals_;  // name, declaration
  // What each open hook opened that its close hook closes (loops and blocks), innermost last.
  std::vector<int> scopes_;
  // Run-time-shared nests being written (open_loops with `varies`), innermost last: the
  // writer's indentation inside their flattened loop, the statement that steps the shared
  // indices, and the code after the lambda that calls it.
  struct SharedNest {
    int body_indent;
    std::string step;
    std::string work;
  };
  std::vector<SharedNest> shared_nests_;
};

}  // namespace zc::codegen::cpp
