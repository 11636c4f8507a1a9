// Dynamic shapes for training calls: size templates (runtime/dynamic/templates.h) for the
// graphs a compiled training call runs, its forward with saved values and its backward
// (runtime/driver/training_graphs.h), so that a training call at a new size of a dynamic dim
// compiles nothing, as an inference call does (docs/dynamic-shapes.md).
//
// The module is traced at the same sample sizes as for inference (trace_size_samples); each
// trace is derived and partitioned for the call's gradients, as the call's own graph is
// (through the lowering level of the cache, so a warm process derives nothing), and the
// forward graphs and the backward graphs are each made into templates as an inference graph's
// samples are: the whole graph, or each distinct part of a hierarchical compile. A partition
// that changes its structure with the sizes (a value recomputed at one size and saved at
// another) leaves that graph without a template: it compiles per size, and ZC_LOGS=recompiles
// says so.
#pragma once

#include <span>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/driver/compile_context.h"
#include "runtime/dynamic/dims.h"

namespace zc::runtime {

// compile_for_all_sizes for a training call whose graph inputs `wrt` (indices into
// captured's inputs) want gradients, partitioned for `budget` (lower/partition.h). Returns
// whether every template was made.
bool compile_training_for_all_sizes(nn::Module& module, std::span<const Tensor> inputs,
                                    const std::vector<DynamicRange>& dims,
                                    const ir::Graph& captured, std::span<const size_t> wrt,
                                    const codegen::Backend& backend, bool hierarchical,
                                    double budget, CompileContext& ctx);

}  // namespace zc::runtime
