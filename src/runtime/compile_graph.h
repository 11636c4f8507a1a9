// From a captured graph to a loaded Executable: the one place that runs the stages after
// capture in order and consults the caches.
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "codegen/pipeline.h"
#include "ir/graph.h"
#include "runtime/executable.h"
#include "util/hash.h"
#include "zc/compile.h"

namespace zc::cache {
class Cache;
}  // namespace zc::cache

namespace zc::runtime {

// The backend a CompileOptions::backend string resolves to on this build and device; raises
// zc::Error naming the known backends for an unknown one.
std::string resolve_backend(const std::string& requested);

// Before compiling the graphs with these hashes at once (the parts of a hierarchical compile):
// asks the remote cache for all of their graph-level entries in one round trip, so their
// lookups do not each wait for one (cache::Cache::prefetch).
void prefetch_graph_entries(std::span<const Digest> hashes, const std::string& backend);

// Connects to the remote cache on another thread, so the connection overlaps the caller's
// capture; only for the first compile of a process with a remote cache (otherwise the future
// is empty). Its destructor waits for the connection. A broken cache configuration raises here,
// as the compile's first lookup would.
std::future<void> prefetch_remote(const std::string& backend);

// The executable for `g` on `backend`, from the in-process code cache or freshly compiled.
// `hash`, when the caller already has it, must be ir::graph_hash(g): it saves hashing again.
std::shared_ptr<const Executable> compile_graph(const ir::Graph& g, const std::string& backend,
                                                std::optional<Digest> hash = std::nullopt);

// Lowering, code generation, the system compiler and loading, without any cache. Raises
// zc::Error when the compiler rejects the generated source (with its output and the path of
// the kept source) or when there is no compiler.
std::shared_ptr<const Executable> compile_cpp_graph(const ir::Graph& g,
                                                    const codegen::CodegenContext& ctx);
// The same through the cache levels of `store` (graph, lowering, kernel); null: no cache.
// `hash` as for compile_graph.
std::shared_ptr<const Executable> compile_cpp_graph(const ir::Graph& g,
                                                    const codegen::CodegenContext& ctx,
                                                    cache::Cache* store,
                                                    std::optional<Digest> hash = std::nullopt);

}  // namespace zc::runtime
