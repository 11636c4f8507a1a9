// The C++ backend's emitter: turns a schedule and its buffer plan into one self-contained C++
// source with one extern "C" function per generated kernel, and the launch plan that calls them.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace zc::codegen::cpp {

struct EmitOptions {
  // Loop nests over at least this many elements get an OpenMP pragma; smaller ones run on
  // the calling thread, where waking a thread team would cost more than the work.
  int64_t parallel_threshold = 32768;
};

struct LaunchStep {
  KernelKind kind;
  std::string symbol;  // generated kernels: the function to call
  int32_t node = -1;   // extern_op: the graph node the runtime runs eagerly
};

struct CppModule {
  std::string source;
  std::vector<LaunchStep> steps;  // in execution order
  int generated_kernels = 0;
  int extern_ops = 0;
  std::vector<int64_t> sizes;  // a schedule whose sizes vary: the recorded sizes (GeneratedSource)
};

CppModule emit(const Schedule& s, const BufferPlan& plan, const EmitOptions& options);

// Each kernel's code starts on a line with this prefix, after everything the kernels share
// (the prelude, the helpers and the ABI): where a source may be cut into units that compile
// side by side (compile_units in backend.cpp).
inline constexpr const char* kKernelLine = "// kernel ";

// The launch plan alone: the same steps emit() returns, without writing any source.
std::vector<LaunchStep> launch_steps(const Schedule& s);

}  // namespace zc::codegen::cpp
