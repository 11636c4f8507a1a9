// bisect_divergence(): the first kernel whose compiled value diverges from eager, for a graph
// whose compiled outputs did (a minifier in small).
//
// The graph is lowered as its backend lowers it, and a prefix of its nodes (the first k) is a
// graph of its own whose outputs are the values it defines that later nodes or the graph's
// outputs read (ir::extract_range). Such a prefix diverges when one of those values, compiled
// on the backend (flat, without any cache), differs from the interpreter's beyond the
// tolerances. A value that diverges passes its error on along some path to the graph's
// outputs, and every cut of the node order crosses that path: so a prefix diverges from the
// culprit on, and a binary search finds it in about log2(nodes) compiles. The culprit is the
// last node of the shortest prefix that diverges; its inputs, values of the prefix one node
// shorter, did not. An error below the tolerances at the culprit that grows beyond them later
// names a later node, on the path it took.
#pragma once

#include <span>
#include <string>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "zc/compile.h"

namespace zc::runtime {

using compiler::AccuracyCulprit;

struct BisectResult {
  bool found = false;
  AccuracyCulprit culprit;
  std::string note;  // why nothing was found, when nothing was
  int compiles = 0;  // prefixes compiled
};

// Input: a captured graph, the values of its inputs (in order), a code-generating backend
// that computes on their device. `bf16_products`: the tolerances of MatmulPrecision::Bf16.
// Raises zc::Error only as compiling the graph would.
BisectResult bisect_divergence(const ir::Graph& captured, std::span<const Tensor> inputs,
                               const codegen::Backend& backend, const AccuracyCheck& check,
                               bool bf16_products);

}  // namespace zc::runtime
