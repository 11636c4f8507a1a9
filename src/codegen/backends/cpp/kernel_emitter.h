// KernelEmitter: writes the C++ function of one kernel. Shared by the per-kind emitters;
// internal to the C++ backend.
#pragma once

#include <string>
#include <vector>

#include "codegen/backends/cpp/cpp_emit.h"
#include "codegen/buffer_plan.h"
#include "codegen/c_expr.h"
#include "codegen/code_writer.h"

namespace zc::codegen::cpp {

class KernelEmitter {
 public:
  KernelEmitter(const Schedule& s, const BufferPlan& plan, const EmitOptions& options,
                CodeWriter& out)
      : s_(s), plan_(plan), opt_(options), out_(out) {}

  // Writes `extern "C" int <name>(const ZcArgs* a) { ... }` for kernel k.
  void emit(int32_t k, const std::string& name);

 private:
  using Names = std::vector<std::string>;

  void emit_pointwise(const Kernel& k);
  void emit_row_reduce(const Kernel& k);
  void emit_matmul(const Kernel& k);
  // The matmul result `value` at C's index `names`, then the epilogue nodes and the stores.
  void emit_epilogue(const Kernel& k, ir::ValueId C, const Names& names, const std::string& value);
  void emit_copy(const Kernel& k);
  void emit_concat(const Kernel& k);
  void emit_gather(const Kernel& k);

  // Loops over `shape` (size-1 dims get no loop), parallel when large; returns the index
  // names, and how many loops were opened (close them with close_loops).
  Names open_loops(const Shape& shape, const std::string& prefix, bool parallel_ok, int* opened);
  void close_loops(int opened);

  // Pointer to the first element of the buffer holding base value v, typed as its storage.
  // Each buffer a kernel touches is hoisted into a __restrict local at the top of the kernel:
  // the planner guarantees that a kernel's buffers do not overlap, and telling the compiler
  // so is what lets it vectorize loops that read one buffer and write another.
  std::string buffer(ir::ValueId base) const;
  // Element of materialized value u at index names for u's own dims.
  std::string load(ir::ValueId u, const Names& idx) const;
  std::string element_ref(ir::ValueId u, const Names& idx) const;  // an lvalue
  std::string store(ir::ValueId v, const Names& idx, const std::string& reg) const;
  // How input u of a node with output shape `out` (index names `names`) is read.
  std::string operand(ir::ValueId u, const Shape& out, const Names& names) const;
  static Names broadcast(const Shape& from, const Shape& to, const Names& names);
  // Declares the register of node n's output.
  void emit_node(int32_t n, const Names& names);
  bool in_register(ir::ValueId u) const;

  const Schedule& s_;
  const BufferPlan& plan_;
  const EmitOptions& opt_;
  CodeWriter& out_;
  CodeWriter w_{1};  // the body of the kernel being emitted
  mutable std::vector<std::pair<std::string, std::string>> locals_;  // name, declaration
  int32_t kernel_ = -1;
  ir::ValueId blas_output_ = -1;  // a matmul result that lives only in memory
};

}  // namespace zc::codegen::cpp
