// The graph interpreter: runs a graph node by node with the registry's eager kernels. It is
// the reference every generated kernel is checked against and the "eager" backend.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "runtime/executable.h"

namespace zc::runtime {

std::vector<Tensor> interpret(const ir::Graph& g, std::span<const Tensor* const> inputs);

std::shared_ptr<const Executable> make_interpreter_executable(ir::Graph g);

}  // namespace zc::runtime
