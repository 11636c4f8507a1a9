// Canonical bytes of a graph (see "Canonical form" in graph.h), the graph hash, and the
// inverse: a graph read back from canonical bytes has canonical numbering and is equal in
// meaning to the one written.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "util/hash.h"

namespace zc::ir {

std::vector<uint8_t> canonical_bytes(const Graph& g);
Digest graph_hash(const Graph& g);
// Raises zc::Error naming the problem for malformed bytes (unknown op, truncation, bad ids).
Graph read_canonical(std::span<const uint8_t> bytes);

}  // namespace zc::ir
