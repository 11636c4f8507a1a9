// The Executable of the C++ backend: a loaded shared object, its launch plan and buffer plan.
// Immutable once built; each call takes a scratch arena from a pool, so calls from many
// threads run at once.
#pragma once

#include <memory>

#include "codegen/pipeline.h"
#include "runtime/executable.h"
#include "toolchain/shared_library.h"

namespace zc::runtime {

std::shared_ptr<const Executable> make_cpp_executable(
    codegen::CodegenResult code, std::shared_ptr<toolchain::SharedLibrary> library);

}  // namespace zc::runtime
