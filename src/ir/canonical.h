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
// The hash of the canonical bytes without sizes: shapes written as their ranks, no reshape
// targets or slice bounds, no values of constants of more than one element. Two graphs with
// equal structure hashes are one computation at possibly different sizes, with values
// numbered alike: what a size template (codegen/size_template.h) is found by.
Digest structure_hash(const Graph& g);
// Raises zc::Error naming the problem for malformed bytes (unknown op, truncation, bad ids).
Graph read_canonical(std::span<const uint8_t> bytes);

}  // namespace zc::ir
