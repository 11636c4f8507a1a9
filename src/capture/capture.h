// Stage 1 of the pipeline: trace a module's forward() on one input into a graph.
#pragma once

#include "capture/tracer.h"
#include "zc/nn.h"

namespace zc::capture {

struct Captured {
  ir::Graph graph;  // the last segment (the whole trace when breaks == 0)
  std::vector<InputBinding> bindings;
  int breaks = 0;
};

// Parameters and buffers of `module` become inputs; module calls become regions. Segments
// before a graph break run through `runner` during the trace. forward() is called directly,
// so the top-level module is not a region of its own.
Captured capture_module(nn::Module& module, const Tensor& x, const SegmentRunner& runner,
                        bool fullgraph);

}  // namespace zc::capture
