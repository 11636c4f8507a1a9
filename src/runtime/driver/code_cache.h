// The in-process code cache: one loaded Executable per (graph hash, backend), shared by every
// module instance with that graph and by every thread. Concurrent misses on one key compile
// once; the others wait for that result, and their compiles hear the owner's cold work
// (CompileProgress). A `compile` that returns null (one that only loads,
// runtime/records/load_hint.h, and found nothing) leaves no entry: a caller waiting on it
// compiles. Hits and misses are counted in the caller's context.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "codegen/executable.h"
#include "runtime/driver/compile_context.h"

namespace zc::runtime {

using codegen::Executable;

using CompileFn = std::function<std::shared_ptr<const Executable>()>;

std::shared_ptr<const Executable> code_cache_get(const std::string& key, const CompileFn& compile,
                                                 CompileContext& ctx);
// Whether `key` is loaded or being compiled in this process.
bool code_cache_contains(const std::string& key);
// Drops every entry and starts a new generation (compiled modules notice and re-capture).
void code_cache_clear();
uint64_t code_cache_generation();

}  // namespace zc::runtime
