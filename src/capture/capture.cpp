#include "capture/capture.h"

namespace zc::capture {

Captured capture_module(nn::Module& module, const Tensor& x, const SegmentRunner& runner,
                        bool fullgraph) {
  Captured out;
  Tracer tracer(runner, fullgraph);
  for (const auto& [name, p] : module.named_parameters()) tracer.mark_parameter(p);
  for (const auto& [name, b] : module.named_buffers()) tracer.mark_parameter(b);
  Tensor traced_x = tracer.add_user_input(x);
  Tensor result;
  {
    ops::InterceptorScope scope(&tracer);
    result = module.forward(traced_x);
  }
  out.graph = tracer.finish(result);
  out.bindings = tracer.bindings();
  out.breaks = tracer.breaks();
  return out;  // the tracer unmarks the parameters as it goes out of scope
}

Captured capture_function(std::span<const Tensor> inputs,
                          const std::function<std::vector<Tensor>()>& fn) {
  Captured out;
  Tracer tracer(nullptr, /*fullgraph=*/true);
  for (const Tensor& t : inputs) tracer.mark_parameter(t);
  std::vector<Tensor> results;
  {
    ops::InterceptorScope scope(&tracer);
    results = fn();
  }
  out.graph = tracer.finish(results);
  out.bindings = tracer.bindings();
  return out;
}

}  // namespace zc::capture
