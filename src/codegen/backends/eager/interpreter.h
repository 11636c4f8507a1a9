// The graph interpreter: runs a graph node by node with the registry's eager kernels. It is
// the reference every generated kernel is checked against, and what the "eager" backend runs.
#pragma once

#include <memory>
#include <span>

#include "codegen/backend.h"
#include "ir/graph.h"

namespace zc::codegen::eager {

std::vector<Tensor> interpret(const ir::Graph& g, std::span<const Tensor* const> inputs);

std::shared_ptr<const Executable> make_interpreter_executable(ir::Graph g);

// The "eager" backend: captured graphs run through the interpreter, on the CPU. It generates
// no code, so nothing of it is cached; it serves as the reference, and as the fallback when a
// code-generating backend cannot run in this process.
std::unique_ptr<Backend> make_eager_backend();

}  // namespace zc::codegen::eager
