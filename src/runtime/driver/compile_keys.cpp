#include "runtime/driver/compile_keys.h"

#include "runtime/records/codec.h"
#include "util/hash.h"
#include "zc/version.h"

namespace zc::runtime {

namespace {
// Bumped when lowering changes what it makes of a graph in a way the build id would not show.
constexpr const char* kLoweringVersion = "v1";
}  // namespace

CompileKeys compile_keys(const std::string& graph_hex, const codegen::Backend& backend) {
  std::string lowering = kLoweringVersion;
  for (ops::OpId op : backend.native_ops())
    lowering += std::string(";keep ") + std::string(ops::op_def(op).name);
  if (backend.splits_long_reductions()) lowering += ";split_reductions";
  return CompileKeys{graph_hex, std::string(backend.name()), lowering, zc::build_id(),
                     backend.key_parts()};
}

// A graph-level entry, after what names it: made by this backend with these codegen options,
// for this build, target and toolchain, as a compiled graph is.
cache::Key CompileKeys::graph_level(cache::Key key) const {
  key.add("backend", backend)
      .add("codegen", parts.codegen)
      .made_for({build, parts.target, parts.toolchain});
  return key;
}

cache::Key CompileKeys::graph_key() const {
  cache::Key key(cache::Level::graph);
  key.add("graph", graph);
  return graph_level(std::move(key));
}

cache::Key CompileKeys::lowering_key() const {
  cache::Key key(cache::Level::lowering);
  key.add("graph", graph).add("lower", lowering).made_for({build, "", ""});
  return key;
}

cache::Key CompileKeys::kernel_key(const std::string& source_hex) const {
  cache::Key key(cache::Level::kernel);
  key.add("source", source_hex).made_for({"", parts.target, parts.toolchain});
  return key;
}

cache::Key CompileKeys::size_template_key(const std::string& structure_hex) const {
  cache::Key key(cache::Level::graph);
  key.add("size_template", structure_hex);
  return graph_level(std::move(key));
}

cache::Key CompileKeys::sized_graph_key() const {
  cache::Key key(cache::Level::graph);
  key.add("sized_from_template", graph);
  return graph_level(std::move(key));
}

cache::Key CompileKeys::sizes_first_key(const std::string& structure_hex, const std::string& shapes,
                                        bool hierarchical) const {
  cache::Key key(cache::Level::graph);
  key.add("sizes_first", structure_hex)
      .add("shapes", shapes)
      .add("hierarchical", hierarchical ? "1" : "0");
  return graph_level(std::move(key));
}

std::string CompileKeys::details() const {
  const std::pair<const char*, const std::string*> rows[] = {{"graph", &graph},
                                                             {"backend", &backend},
                                                             {"lowering", &lowering},
                                                             {"build", &build},
                                                             {"codegen", &parts.codegen},
                                                             {"target", &parts.target},
                                                             {"toolchain", &parts.toolchain}};
  std::string out;
  for (const auto& [name, value] : rows) {
    std::string shown = value->size() > 160 ? value->substr(0, 157) + "..." : *value;
    out += "  " + std::string(name) + " " + hex(sha256(*value)).substr(0, 12) + " " + shown + "\n";
  }
  return out;
}

cache::Key training_graphs_key(const std::string& graph_hex, std::span<const size_t> wrt,
                               double budget) {
  std::string inputs;
  for (size_t i : wrt) inputs += (inputs.empty() ? "" : ",") + std::to_string(i);
  // Budget 1 (the default) names no budget: its partition is the one made before budgets were.
  if (budget < 1) inputs += " budget " + std::to_string(budget);
  cache::Key key(cache::Level::lowering);
  key.add("graph", graph_hex)
      .add("training", record_key_name(kTrainingGraphsFormat) + " wrt " + inputs)
      .made_for({zc::build_id(), "", ""});
  return key;
}

cache::Key load_hint_key(std::string_view what, const Digest& context,
                         const codegen::Backend& backend, bool size_templates) {
  cache::Key key(cache::Level::autotune);
  key.add("record", record_key_name(kLoadHintFormat))
      .add("compile", std::string(what))
      .add("context", hex(context))
      .add("backend", std::string(backend.name()))
      .add("sizes", size_templates ? "any" : "own");
  return key;
}

cache::Key call_record_key(std::string_view name, std::string_view context) {
  cache::Key key(cache::Level::autotune);
  key.add("record", record_key_name(kCallRecordFormat))
      .add("function", std::string(name))
      .add("context", std::string(context));
  return key;
}

cache::Key cublaslt_record_key(const std::string& gpu, const std::string& libraries) {
  cache::Key key(cache::Level::autotune);
  key.add("record", record_key_name(kGemmRecordFormat)).made_for({"", gpu, libraries});
  return key;
}

cache::Key cpu_gemm_choice_key(const std::string& problem, int threads,
                               const cache::Provenance& host) {
  cache::Key key(cache::Level::autotune);
  key.add("record", record_key_name(kTuningFormat))
      .add("problem", problem)
      .add("threads", std::to_string(threads))
      .made_for(host);
  return key;
}

std::string code_key(const Digest& graph, const codegen::Backend& backend, bool size_templates,
                     const ProductOptions& products) {
  return hex(graph) + ":" + std::string(backend.name()) + (size_templates ? ":any-size" : "") +
         (products.autotune ? ":autotuned" : "") + (products.bf16 ? ":bf16" : "") +
         (products.tf32 ? ":tf32" : "");
}

}  // namespace zc::runtime
