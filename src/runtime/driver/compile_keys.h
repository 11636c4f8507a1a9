// Every cache key zc makes, in one place.
//
// CompileKeys gathers every input of a compile besides the graph itself: the keys of the three
// compile levels and of the graph level's other entries are made from it, and it prints itself
// one part to a line (as Inductor's hash details do), so that ZC_LOGS=cache shows which part
// made two runs' keys differ. The records and hints of the autotune level (never a compiled
// result) have keys of their own, below, as do the in-process code cache's entries.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cache/keys.h"
#include "codegen/backend.h"
#include "runtime/driver/product_options.h"
#include "util/hash.h"

namespace zc::runtime {

struct CompileKeys {
  std::string graph;        // SHA-256 of the captured graph's canonical bytes, hex
  std::string backend;      // the backend's name
  std::string lowering;     // the lowering stage's version and the ops the backend keeps whole
  std::string build;        // zc's build id: a hash of its own sources
  codegen::KeyParts parts;  // the backend's: codegen options, target, toolchain

  // A hit skips everything: graph, backend, codegen options, build, target, toolchain.
  cache::Key graph_key() const;
  // The primitive graph: graph, lowering version, build.
  cache::Key lowering_key() const;
  // A binary: its source (SHA-256, hex), target, toolchain. No build id: a binary depends on
  // its source and the compiler alone, so it outlives zc rebuilds that leave the source as it is.
  cache::Key kernel_key(const std::string& source_hex) const;

  // The graph level's other entries, made for what graph_key is made for:
  // a size template, by the structure hash (hex) of the lowered graphs it serves;
  cache::Key size_template_key(const std::string& structure_hex) const;
  // a graph a size template served (its lowered bytes and how the template served it);
  cache::Key sized_graph_key() const;
  // the dims the templates of a first call cover (sizes first), by the captured graph's
  // structure, its inputs' shapes with the templated sizes left out, and its regions.
  cache::Key sizes_first_key(const std::string& structure_hex, const std::string& shapes,
                             bool hierarchical) const;

  // One line per part: its name, a SHA-256 prefix of its value, and the value (long ones cut).
  std::string details() const;

 private:
  cache::Key graph_level(cache::Key key) const;
};

CompileKeys compile_keys(const std::string& graph_hex, const codegen::Backend& backend);

// The lowering level's other entry: a training call's forward and backward graphs, by the
// captured graph, the inputs that want gradients and the activation-memory budget.
cache::Key training_graphs_key(const std::string& graph_hex, std::span<const size_t> wrt,
                               double budget);

// The autotune level: records and hints, each made for what decides its contents.
// A load hint: the graphs compiling `what` of `context` loaded.
cache::Key load_hint_key(std::string_view what, const Digest& context,
                         const codegen::Backend& backend, bool size_templates);
// A compiled function's record of its calls, by its name and its caller's context.
cache::Key call_record_key(std::string_view name, std::string_view context);
// The cuBLASLt products a process ran on a kind of GPU (`gpu`), with those libraries.
cache::Key cublaslt_record_key(const std::string& gpu, const std::string& libraries);
// A CPU GEMM choice: the problem (GemmProblem::str), the team it was timed with, made for the
// CPU and GEMM libraries of `host`.
cache::Key cpu_gemm_choice_key(const std::string& problem, int threads,
                               const cache::Provenance& host);

// The in-process code cache's key of a graph (runtime/driver/code_cache.h): code for this size
// only, or possibly a template's (they differ in the last bits and in speed), and with library
// products run other than by default (ProductOptions: autotune, bf16, tf32), each its own entry.
std::string code_key(const Digest& graph, const codegen::Backend& backend, bool size_templates,
                     const ProductOptions& products = {});

}  // namespace zc::runtime
