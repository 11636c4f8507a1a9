// Every input of a compile besides the graph itself, gathered in one place: the keys of the
// three cache levels are made from it, and it prints itself one part to a line (as Inductor's
// hash details do), so that ZC_LOGS=cache shows which part made two runs' keys differ.
#pragma once

#include <string>

#include "cache/keys.h"
#include "codegen/backend.h"

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

  // One line per part: its name, a SHA-256 prefix of its value, and the value (long ones cut).
  std::string details() const;
};

CompileKeys compile_keys(const std::string& graph_hex, const codegen::Backend& backend);

}  // namespace zc::runtime
