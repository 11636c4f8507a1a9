// Sizes first (Dynamic::Auto; ADR 0032, docs/dynamic-shapes.md): code for all sizes of a graph
// at its first call, when constant sizes would buy it little.
//
// A graph whose products go to a library spends its time in calls that take their sizes as
// arguments anyway; torch's Inductor makes its kernels so even in a static compile, which is why
// its recompile with a symbolic length is cheap. Such a graph's first call makes the size
// templates (runtime/size_templates.h) for every dim of its inputs that traces alike at other
// sizes, so its second size is a recompile the templates serve, with no compiler run. A graph
// with only small products keeps constant sizes (inline loops with fixed trip counts are
// faster), and a convolution net cannot have templates (its output sizes divide); both compile
// per size until a second size, as before.
#pragma once

#include <span>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/dynamic_shapes.h"

namespace zc::runtime {

// Whether a graph's first compile should make code for all sizes: some matmul or linear of
// it goes to a library at its sizes (the backend's own matmul_path), and it has no
// convolution, im2col or pooling.
bool sizes_first_pays(const ir::Graph& captured, const codegen::Backend& backend);

// Makes the templates over `dims` (GuardMiss::sizes_first), leaving out dims that do not trace
// alike, and records in the graph level which dims they cover and which templates they are: a
// fresh process's first call that finds the record, and each of its templates, traces and
// makes nothing. Returns the dims covered; empty when no template was made.
std::vector<DynamicRange> compile_sizes_first(nn::Module& module, std::span<const Tensor> inputs,
                                              const std::vector<DynamicRange>& dims,
                                              const ir::Graph& captured,
                                              const codegen::Backend& backend, bool hierarchical);

}  // namespace zc::runtime
