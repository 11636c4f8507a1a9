// Stage 3 for the CPU: from a lowered graph to C++ source and its launch plan.
#pragma once

#include "codegen/backends/cpp/cpp_backend.h"
#include "codegen/kernel_ir.h"
#include "codegen/schedule.h"

namespace zc::codegen {

struct CodegenContext {
  ScheduleOptions schedule;
  cpp::EmitOptions emit;
};

struct CodegenResult {
  Schedule schedule;
  BufferPlan plan;
  cpp::CppModule module;
};

// Input: a verified graph of primitive ops. Output: the schedule, the buffer plan and the
// generated module; generated source is self-contained (math.h, stdint.h, string.h).
// Without `emit_source`, only the launch plan is made (for a binary loaded from a cache).
CodegenResult codegen_cpp(const ir::Graph& lowered, const CodegenContext& ctx,
                          bool emit_source = true);

}  // namespace zc::codegen
