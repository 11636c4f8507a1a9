// The compile driver's entry: one captured graph in, its executable and what compiling it did
// out. Compiled modules (their inference and training variants), compiled functions and eager
// ops on a GPU all compile through here; the parts (compile_graph for one graph, the regions'
// compile_hierarchical for a graph of repeated blocks) are its steps.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/driver/compile_context.h"
#include "runtime/driver/compile_graph.h"
#include "util/hash.h"

namespace zc::runtime {

// What to compile: a captured graph in its backend's layout (runtime/driver/backend_layout.h),
// and how.
struct CompileRequest {
  const ir::Graph& graph;
  const Backend& backend;
  // ir::graph_hash(graph), when the caller has it.
  std::optional<Digest> hash;
  // Regions::Auto: each distinct repeated block compiled once (runtime/regions/compile.h).
  bool hierarchical = false;
  // Code made once for many sizes may serve it (runtime/dynamic/templates.h); not under
  // Dynamic::Static.
  bool size_templates = false;
  // How library products run: Mode::MaxAutotune, MatmulPrecision.
  ProductOptions products;
  // Replayed as one device graph (Backend::replayable), the graph inputs flagged in
  // `per_call` changing per call.
  bool replay = false;
  std::vector<bool> per_call;
};

struct Compiled {
  std::shared_ptr<const Executable> exec;
  // The distinct graphs compiled, by ir::graph_hash, in order of first use (what a load hint
  // records: runtime/records/load_hint.h).
  std::vector<Digest> graphs;
  // What this request did; also counted into the context it was given.
  CompileReport report;
};

Compiled compile(const CompileRequest& request, CompileContext& ctx);

}  // namespace zc::runtime
