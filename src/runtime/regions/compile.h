// Hierarchical compilation: a captured graph run as a sequence of compiled parts, where every
// call of a repeated block shares one executable (see plan.h). Compiling a 64-layer model
// costs what one layer and the glue around it cost.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/regions/plan.h"

namespace zc::runtime {

// Plans the regions of `g`, compiles each distinct part once (through compile_graph and the
// context's caches; the parts side by side, sharing the context) and returns an executable
// that runs the parts in order; the whole graph compiled as one when no region repeats.
// `size_templates` and `products` as for compile_graph; the parts are tuned one after another once
// all are built (timings taken while another part's compiler runs would measure it). `graphs`, when
// given, receives the ir::graph_hash of each distinct graph compiled, in order of first use
// (runtime/records/load_hint.h records them).
std::shared_ptr<const codegen::Executable> compile_hierarchical(
    const ir::Graph& g, const codegen::Backend& backend, CompileContext& ctx,
    const RegionRule& rule = {}, bool size_templates = false, ProductOptions products = {},
    std::vector<Digest>* graphs = nullptr);

// The executable that runs the parts of `plan` (plan_regions of `g`) in order, each part's
// executable given by `part_exec` (called once per part, in order; a repeated block gives the
// same one each time). What compile_hierarchical returns, for a caller that has the parts'
// executables already (a package loads them from its own file).
std::shared_ptr<const codegen::Executable> plan_executable(
    const ir::Graph& g, const RegionPlan& plan,
    const std::function<std::shared_ptr<const codegen::Executable>(const GraphPart&)>& part_exec);

}  // namespace zc::runtime
