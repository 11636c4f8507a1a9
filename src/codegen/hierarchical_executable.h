// An executable that runs other executables in order over the values of one graph: each part
// reads graph inputs or values earlier parts wrote, and writes values of its own. What a
// hierarchical compile makes of a graph's parts, where every call of a repeated block shares
// one executable (runtime/regions/compile.h), and what a package assembles from the parts it
// holds.
//
// Values passed between parts live in one arena, reused once a value's last reader has run; a
// part that may write an output over an input dying at it (a convolution adding its
// residual) gets the output placed there. When every part runs on raw buffers on one device,
// a call is one pass over pointer tables with no allocation per part.
#pragma once

#include <memory>
#include <vector>

#include "codegen/executable.h"
#include "ir/graph.h"

namespace zc::codegen {

// One part: its executable, and the values of the outer graph it reads (in the order of its
// inputs) and writes (in the order of its outputs).
struct PartCall {
  std::shared_ptr<const Executable> exec;
  std::vector<ir::ValueId> inputs, outputs;
};

// The parts of `g` run in order; together they write every output of `g`.
std::shared_ptr<const Executable> hierarchical_executable(const ir::Graph& g,
                                                          std::vector<PartCall> parts);

}  // namespace zc::codegen
