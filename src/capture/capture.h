// Stage 1 of the pipeline: trace a module's forward() on one input into a graph.
#pragma once

#include "capture/tracer.h"
#include "zc/nn.h"

namespace zc::capture {

struct Captured {
  ir::Graph graph;  // the last segment (the whole trace when breaks == 0)
  std::vector<InputBinding> bindings;
  int breaks = 0;
  // Tensors read as constants that did not want gradients (Tracer::constants_read).
  std::vector<std::weak_ptr<TensorImpl>> constants_read;
  // Buffers forward() updated in place, whose values are the graph's last outputs
  // (Tracer::writes): a call applies them once, after the graph ran.
  std::vector<BufferWrite> writes;
};

// Parameters and buffers of `module` become inputs; module calls become regions. Segments
// before a graph break run through `runner` during the trace. forward() is called directly,
// so the top-level module is not a region of its own. With several inputs the many-input
// forward is called, and the graph's outputs are its results in order; user input i is the
// binding whose `user` is i. Raises zc::Error for no inputs, or a forward returning none or
// an undefined tensor.
Captured capture_module(nn::Module& module, std::span<const Tensor> inputs,
                        const SegmentRunner& runner, bool fullgraph);
// The one-tensor forward on `x`; its one result is the graph's output.
Captured capture_module(nn::Module& module, const Tensor& x, const SegmentRunner& runner,
                        bool fullgraph);

// Traces `fn`, which computes on `inputs` (each marked like a parameter: it becomes a graph
// input of kind parameter on first use, its binding the tensor itself), into one graph whose
// outputs are fn's results. No graph breaks: reading a traced value raises zc::Error. For
// computations that are not module calls (an optimizer's update).
Captured capture_function(std::span<const Tensor> inputs,
                          const std::function<std::vector<Tensor>()>& fn);

}  // namespace zc::capture
