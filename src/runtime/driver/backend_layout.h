// A captured graph in the layout its backend computes it in, before anything is derived from
// it: its hash (the graph level's key), its region plan, the sizes a template is checked
// against, a package's stored graphs. Today that is channels-last convolutions
// (lower/channels_last.h) for a backend that keeps conv2d_nhwc, and convolutions with their
// epilogues for one that keeps conv2d (a block's last ReLU then belongs to its convolution, in
// the block's region, whichever way regions are cut). Done here rather than only in
// lowering so that a repeated block's parts pass channels-last tensors to each other: lowered
// one by one, each part would convert its inputs and outputs at every block boundary.
#pragma once

#include "codegen/backend.h"
#include "ir/graph.h"

namespace zc::runtime {

// Input: a verified captured graph. Output: a graph computing the same values with the same
// inputs, outputs and regions; `captured` itself when the backend asks for nothing.
// Idempotent, so a graph read back from a cache or a package may pass through it again.
ir::Graph in_backend_layout(ir::Graph captured, const codegen::Backend& backend);

}  // namespace zc::runtime
