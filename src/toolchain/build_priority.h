// The scheduling priority of the compiler processes zc starts.
//
// While a compile runs in the background (CompileOptions::async_compile), the module's calls
// meanwhile run eagerly on the same cores, and those are what a user waits for. Compiler
// processes started then run niced, so the eager calls get the CPU first and the compile takes
// what is left: on 2 cores an eager gpt-small call beside two compiler processes at equal
// priority took 3-6x its time. Process-wide, as the parts of one compile build on threads of
// their own; a foreground compile that overlaps a background one is niced with it.
#pragma once

#include <cstddef>

namespace zc::toolchain {

// Held by a background compile for its duration.
class BackgroundBuildScope {
 public:
  BackgroundBuildScope();
  ~BackgroundBuildScope();
  BackgroundBuildScope(const BackgroundBuildScope&) = delete;
  BackgroundBuildScope& operator=(const BackgroundBuildScope&) = delete;
};

// The niceness a compiler process starts with now: 10 while a background compile runs, else 0
// (the process's own).
int compiler_niceness();

// The threads a compile step shares its own work among (util/parallel.h run_indexed): 1 while
// a background compile runs, else 0 (all).
size_t compile_threads();

}  // namespace zc::toolchain
