// The serialized form of a C++-backend executable: what the graph-level cache stores.
//
// It holds the lowered graph (canonical bytes), the code generation options and the compiled
// shared object. Loading re-runs the scheduler and buffer planner on the lowered graph, which
// is deterministic for a given zc build (the build id is part of every graph key) and takes
// well under a millisecond, instead of storing their output; then loads the binary from memory.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "codegen/pipeline.h"
#include "runtime/executable.h"

namespace zc::runtime {

struct CppArtifact {
  std::vector<uint8_t> lowered;  // ir::canonical_bytes of the lowered graph
  codegen::CodegenContext ctx;
  std::vector<uint8_t> binary;
};

std::vector<uint8_t> encode_artifact(const CppArtifact& a);
// Raises zc::Error naming the problem when the bytes are malformed.
CppArtifact decode_artifact(std::span<const uint8_t> bytes);

// The key component for code generation options.
std::string describe(const codegen::CodegenContext& ctx);

// An executable from an artifact: schedule, plan, load the binary. Raises zc::Error if the
// binary does not match the schedule (a missing kernel symbol).
std::shared_ptr<const Executable> load_artifact(const CppArtifact& a);

}  // namespace zc::runtime
