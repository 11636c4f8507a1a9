// Size templates in the compile path: code generated and built once for many sizes of one
// graph (codegen/size_template.h), stored in the caches beside the graph level, and found for
// a new size by the graph's structure hash.
//
// make_size_template() is given one captured graph at several sizes (the samples a compiled
// module traces when a dimension becomes dynamic). It lowers each, finds the dims that vary,
// names the graph's symbols after the inputs' varying dims, generates each sample with those
// dims varying, fits the recorded sizes to polynomials, builds the source once and stores the
// template under the lowered graph's structure hash.
//
// executable_from_template() is asked by build_executable for every lowered graph of a backend
// that serves many sizes, before anything is generated for it alone. It generates the graph
// with the template's varying dims (which compiles nothing) and accepts the template only when
// the text is the template's and every recorded size is its polynomial's value at this
// graph's symbols: the code then does exactly what code generated for this size alone would.
// Every relation the code relies on (two sizes equal, a size in a range, a branch taken) is
// checked that way; a graph the template does not serve is compiled for its own size.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/driver/compile_context.h"
#include "runtime/driver/compile_keys.h"

namespace zc::runtime {

// `family`: captured graphs with equal structure hashes after lowering, one per sample; two or
// more sizes of each varying dim beyond a fit's degree (size_poly.h). Returns the lowered
// structure (hex) the template is stored under, or nullopt when none was made
// (ZC_LOGS=recompiles says why not). Builds through the kernel level of the context's cache
// (without one, the template is kept nowhere).
std::optional<std::string> make_size_template(std::span<const ir::Graph> family,
                                              const codegen::Backend& backend, CompileContext& ctx);

// Whether the context's cache holds a template made on `backend` (with this build, target and
// toolchain) under the lowered structure `structure_hex`.
bool holds_size_template(const std::string& structure_hex, const codegen::Backend& backend,
                         CompileContext& ctx);

// How a template served one graph: what loads that graph again without generating its code.
struct SizedUse {
  std::vector<uint64_t> varying;  // the template's (Schedule::varying)
  std::vector<int64_t> symbols;   // the graph's symbol values
  std::string source_hex;         // the template binary's kernel-level key
};

// The executable of `lowered` (canonically numbered) from its stored template, or null.
// `used`, when given and the template serves, says how.
std::shared_ptr<const codegen::Executable> executable_from_template(const ir::Graph& lowered,
                                                                    const codegen::Backend& backend,
                                                                    CompileContext& ctx,
                                                                    const CompileKeys& keys,
                                                                    SizedUse* used = nullptr);

// A graph a template served, recorded at the graph level under its own key
// (CompileKeys::sized_graph_key, not the graph key: a package takes the graph key's artifact for
// the graph's own binary): its lowered bytes and SizedUse, a few kilobytes, with the binary left
// at the kernel level where the template's other sizes share it. A later process loads it as it
// loads any artifact (schedule, plan, load), without lowering, generating or checking the
// template again: the record was made for this exact graph under the same keys.
std::vector<uint8_t> encode_sized(const std::vector<uint8_t>& lowered, const SizedUse& used);
// Null when the record is unusable or the binary is no longer at the kernel level.
std::shared_ptr<const codegen::Executable> load_sized(std::span<const uint8_t> record,
                                                      const codegen::Backend& backend,
                                                      CompileContext& ctx, const CompileKeys& keys);

// A template as stored: its record and its binary.
struct StoredTemplate {
  std::vector<uint8_t> record, binary;
};

// The template the context's cache holds for graphs of `lowered`'s structure, with its binary;
// nullopt when it holds none or lacks the binary.
std::optional<StoredTemplate> stored_size_template(const ir::Graph& lowered, CompileContext& ctx,
                                                   const CompileKeys& keys);

// The check and bind of executable_from_template, from a record and binary given directly (a
// package holds them by structure hash, not under cache keys): the executable of `lowered`
// when the template serves it, else null with the reason in `why`. Compiles nothing.
std::shared_ptr<const codegen::Executable> bind_size_template(const ir::Graph& lowered,
                                                              const codegen::Backend& backend,
                                                              std::span<const uint8_t> record,
                                                              std::span<const uint8_t> binary,
                                                              std::string* why = nullptr);

}  // namespace zc::runtime
