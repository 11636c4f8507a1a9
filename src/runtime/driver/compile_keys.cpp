#include "runtime/driver/compile_keys.h"

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

cache::Key CompileKeys::graph_key() const {
  cache::Key key(cache::Level::graph);
  key.add("graph", graph)
      .add("backend", backend)
      .add("codegen", parts.codegen)
      .made_for({build, parts.target, parts.toolchain});
  return key;
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

}  // namespace zc::runtime
