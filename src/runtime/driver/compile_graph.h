// From one captured graph to a loaded Executable: the stages after capture in order, over a
// Backend, with the cache levels of the compile's context consulted between them. Every step
// counts what it does into that context (runtime/driver/compile_context.h).
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/driver/compile_context.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/driver/product_options.h"
#include "util/hash.h"
#include "zc/device.h"

namespace zc::runtime {

using codegen::Backend;
using codegen::Executable;

// Checks a CompileOptions::backend value before any input is seen: "auto", or the name of a
// backend of this build that can run in this process. Raises zc::Error naming the known
// backends for an unknown name, and the reason for one that cannot run here.
void check_backend(const std::string& requested);

// The backend that CompileOptions::backend selects for inputs on `device`. "auto" is the
// device's code-generating backend or, when this process cannot use it (no compiler), the
// eager backend, with one warning per process. A named backend is returned as check_backend
// accepted it; raises zc::Error when it computes on another device than the inputs'.
const Backend& resolve_backend(const std::string& requested, Device device);

// Before compiling the graphs with these hashes at once (the parts of a hierarchical compile):
// asks the remote cache for all of their graph-level entries (and, on a backend that serves
// many sizes, their size-template records: runtime/dynamic/templates.h, sized_key) in one
// round trip, so their lookups do not each wait for one (cache::Cache::prefetch).
void prefetch_graph_entries(std::span<const Digest> hashes, const Backend& backend,
                            CompileContext& ctx);

// Connects to the remote cache on another thread, so the connection overlaps the caller's
// capture; only for the first compile of a process with a remote cache (otherwise the future
// is empty). Its destructor waits for the connection. A broken cache configuration raises here,
// as the compile's first lookup would.
std::future<void> prefetch_remote(const Backend& backend, CompileContext& ctx);

// The executable for `g` on `backend`, from the in-process code cache or made through
// build_executable with the context's cache. `hash`, when the caller already has it, must be
// ir::graph_hash(g): it saves hashing again. `size_templates`: code made once for many sizes
// (runtime/dynamic/templates.h) may serve it; false for a module compiled with
// Dynamic::Static. `products` other than the default: its library products run as they say, a
// second in-process entry beside the default one, which it starts from.
std::shared_ptr<const Executable> compile_graph(const ir::Graph& g, const Backend& backend,
                                                CompileContext& ctx,
                                                std::optional<Digest> hash = std::nullopt,
                                                bool size_templates = false,
                                                ProductOptions products = {});

// The executable of the graph whose ir::graph_hash is `hash`, from the in-process code cache or
// loaded from the graph level of the context's cache, into the code cache under the key that
// compile_graph(g, backend, ctx, hash, size_templates) uses; null when neither holds it
// (nothing is compiled: there is no graph to compile). A compile_graph of that graph meanwhile
// waits for it, and compiles should it come back null.
std::shared_ptr<const Executable> load_cached_graph(const Digest& hash, const Backend& backend,
                                                    bool size_templates, CompileContext& ctx);

// Builds and loads the backend's support kernels (Backend::support_source) once per process,
// through the kernel level of the process cache, before their first use (Backend::dense_copy);
// nothing for a backend without them. Raises zc::Error when the backend cannot build or load
// them here.
void ensure_support(const Backend& backend);

// Lowering, code generation, building and loading for a code-generating backend, through the
// cache levels of the context (graph, lowering, kernel; a context without a cache computes
// each). Raises zc::Error when the backend's toolchain rejects the generated source (with its
// diagnostics) or is missing. `hash` and `size_templates` as for compile_graph.
std::shared_ptr<const Executable> build_executable(const ir::Graph& g, const Backend& backend,
                                                   CompileContext& ctx,
                                                   std::optional<Digest> hash = std::nullopt,
                                                   bool size_templates = false);

// The graph level's entry of `g` (whose ir::graph_hash is `hash`) as an encoded artifact
// (runtime/driver/artifact.h), with the graph's own binary: from the context's cache, or
// lowered, generated and built as build_executable would and stored there. What a package
// holds: never served by a size template, whose binary is shared by many sizes.
std::vector<uint8_t> graph_artifact(const ir::Graph& g, const Digest& hash, const Backend& backend,
                                    CompileContext& ctx);

// The lowering level: the canonical bytes of `captured` lowered for `backend`, from the
// context's cache when it has them. `keys` are compile_keys() of the captured graph.
std::vector<uint8_t> lowered_bytes(const ir::Graph& captured, const Backend& backend,
                                   CompileContext& ctx, const CompileKeys& keys);

// The kernel level: the binary of `source`, from the context's cache or built by the backend
// (then `build_ms` is set and the build counted as a compiler run).
std::vector<uint8_t> binary_for(const CompileKeys& keys, const Backend& backend,
                                CompileContext& ctx, const codegen::GeneratedSource& source,
                                double* build_ms);

}  // namespace zc::runtime
