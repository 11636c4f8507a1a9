// Stage 3: from a lowered graph to a backend's source, with the schedule and buffer plan that
// source was written for (what the backend loads its binary against).
#pragma once

#include "codegen/backend.h"

namespace zc::codegen {

struct CodegenResult {
  Schedule schedule;
  BufferPlan plan;
  GeneratedSource source;  // empty when not asked for
};

// Input: a verified graph of primitive ops; `backend` generates code. Output: a schedule that
// verify_schedule() accepts, its buffer plan and, with `emit_source`, the backend's source.
// Without it only the schedule and plan are made: what loading a cached binary needs.
// `varying`: per value, the dims that vary between the sizes the code must serve
// (Schedule::varying); empty for code of one size.
CodegenResult codegen(const ir::Graph& lowered, const Backend& backend, bool emit_source = true,
                      std::vector<uint64_t> varying = {});

}  // namespace zc::codegen
