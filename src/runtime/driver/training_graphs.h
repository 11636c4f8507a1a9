// The forward and backward graphs of a compiled training call, through the lowering level of
// the compile's cache.
//
// Input: a captured graph (verified) and `wrt`, the indices of its inputs that want gradients.
// Output: for each entry of `wrt` whether it gets a gradient, and, when any does, the
// partition of the joint graph (lower::joint_graph, then lower::partition): the graphs the
// training forward and backward compile.
//
// Deriving and partitioning depend on the captured graph, `wrt` and zc's build alone (the
// derivative rules and the partitioner are its sources), so the result is stored under a
// lowering-level key of those: a warm process's first training step reads the two graphs back
// (canonical bytes) instead of deriving them again, which for a 12-layer GPT took about 7 ms
// of that step on the GPU host. Graphs read back have canonical numbering; compiling them
// gives the graph-level keys that compiling the derived ones gives, since those keys are
// hashes of canonical bytes.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "lower/partition.h"
#include "runtime/driver/compile_context.h"
#include "util/hash.h"

namespace zc::runtime {

struct TrainingGraphs {
  std::vector<bool> has_grad;                 // per entry of wrt
  std::optional<lower::Partition> partition;  // none when no entry gets a gradient
  // Read from the cache: the backward's canonical bytes, left for backward_graph() to decode
  // on the thread that compiles the backward (the forward's first run does not wait for the
  // larger graph's decoding, about 1 ms of a 12-layer GPT's warm first step); partition's
  // backward is then empty. Empty when derived.
  std::vector<uint8_t> backward_bytes;
  // The digest of the key the graphs are stored under (the captured graph, `wrt`, zc's build):
  // what names them to other records, such as the backward's load hint.
  Digest key{};
};

// Through the lowering level of the context's cache. `budget`: the activation-memory budget the
// partition is made for (lower/partition.h), part of the key.
TrainingGraphs training_graphs(const ir::Graph& captured, std::span<const size_t> wrt,
                               double budget, CompileContext& ctx);

// The backward graph of `t` (moved out of it): partition->backward, or backward_bytes decoded.
// Stored bytes that do not decode are logged and the graphs derived again from `captured` and
// `wrt` (the derivation is deterministic, so the backward fits the forward already read).
ir::Graph take_backward(TrainingGraphs& t, const ir::Graph& captured, std::span<const size_t> wrt,
                        double budget, CompileContext& ctx);

}  // namespace zc::runtime
