#include "capture/capture.h"

#include "capture/trace_lock.h"

namespace zc::capture {

namespace {
Captured trace(nn::Module& module, std::span<const Tensor> inputs, const SegmentRunner& runner,
               bool fullgraph, bool one_tensor) {
  if (inputs.empty()) throw Error(module.type_name() + ": called with no input tensors");
  Captured out;
  CaptureScope exclusive;  // the parameters are marked traced until the tracer goes
  Tracer tracer(runner, fullgraph);
  for (const auto& [name, p] : module.named_parameters()) tracer.mark_parameter(p);
  for (const auto& [name, b] : module.named_buffers()) tracer.mark_parameter(b);
  std::vector<Tensor> traced;
  for (const Tensor& x : inputs) traced.push_back(tracer.add_user_input(x));
  std::vector<Tensor> results;
  {
    ops::InterceptorScope scope(&tracer);
    if (one_tensor) {
      results.push_back(module.forward(traced[0]));
    } else {
      results = module.forward(traced);
    }
  }
  if (results.empty()) throw Error(module.type_name() + ": forward() returned no tensors");
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].defined()) {
      throw Error(module.type_name() + ": forward() returned an undefined Tensor" +
                  (one_tensor ? std::string() : " as output " + std::to_string(i)));
    }
  }
  out.graph = tracer.finish(results);
  out.bindings = tracer.bindings();
  out.breaks = tracer.breaks();
  out.constants_read = tracer.constants_read();
  out.writes = tracer.writes();
  return out;  // the tracer unmarks the parameters as it goes out of scope
}
}  // namespace

Captured capture_module(nn::Module& module, std::span<const Tensor> inputs,
                        const SegmentRunner& runner, bool fullgraph) {
  return trace(module, inputs, runner, fullgraph, /*one_tensor=*/false);
}

Captured capture_module(nn::Module& module, const Tensor& x, const SegmentRunner& runner,
                        bool fullgraph) {
  return trace(module, std::span<const Tensor>(&x, 1), runner, fullgraph, /*one_tensor=*/true);
}

Captured capture_function(std::span<const Tensor> inputs,
                          const std::function<std::vector<Tensor>()>& fn) {
  Captured out;
  CaptureScope exclusive;
  Tracer tracer(nullptr, /*fullgraph=*/true);
  for (const Tensor& t : inputs) tracer.mark_parameter(t);
  std::vector<Tensor> results;
  {
    ops::InterceptorScope scope(&tracer);
    results = fn();
  }
  out.graph = tracer.finish(results);
  out.bindings = tracer.bindings();
  if (!tracer.writes().empty()) {
    throw Error(
        "capture: a traced function updated one of its inputs in place (index_copy_); "
        "return the updated value instead");
  }
  return out;
}

}  // namespace zc::capture
