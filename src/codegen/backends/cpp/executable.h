// The Executable of the C++ backend: a loaded shared object, its launch plan and buffer plan.
// Immutable once built; each call takes a scratch arena from a pool, so calls from many
// threads run at once.
#pragma once

#include <memory>

#include "codegen/buffer_plan.h"
#include "codegen/executable.h"
#include "toolchain/shared_library.h"

namespace zc::codegen::cpp {

// `library` holds the kernels emit() wrote for this schedule and plan, or for a size template
// that serves this schedule's sizes (schedule.symbolic()), whose kernels then receive
// `symbols`. Raises zc::Error when a kernel's symbol is missing from it.
std::shared_ptr<const Executable> make_cpp_executable(
    Schedule schedule, BufferPlan plan, std::shared_ptr<toolchain::SharedLibrary> library,
    std::vector<int64_t> symbols = {});

}  // namespace zc::codegen::cpp
