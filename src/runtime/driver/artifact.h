// The serialized form of a compiled graph: what the graph-level cache stores.
//
// It holds the backend's name, the lowered graph (canonical bytes) and the backend's binary.
// Loading re-runs the scheduler and buffer planner on the lowered graph, which is
// deterministic for a given zc build and backend options (both are in every graph key) and
// takes well under a millisecond, instead of storing their output; then the backend loads the
// binary against them.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codegen/backend.h"

namespace zc::runtime {

struct Artifact {
  std::string backend;
  std::vector<uint8_t> lowered;  // ir::canonical_bytes of the lowered graph
  std::vector<uint8_t> binary;
};

std::vector<uint8_t> encode_artifact(const Artifact& a);
// Raises zc::Error naming the problem when the bytes are malformed.
Artifact decode_artifact(std::span<const uint8_t> bytes);

// An executable from an artifact made by `backend`: schedule, plan, load the binary. Raises
// zc::Error when the artifact is another backend's or its binary does not match the schedule.
std::shared_ptr<const codegen::Executable> load_artifact(const Artifact& a,
                                                         const codegen::Backend& backend);

}  // namespace zc::runtime
