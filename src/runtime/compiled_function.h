// A function of tensors compiled as one graph: traced once (capture::capture_function), then
// compiled through compile_graph, so every cache level holds it and a warm process compiles
// nothing. What a compiled optimizer step is made of: a call runs the whole update of every
// parameter as one executable instead of a dozen eager ops per parameter.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "codegen/executable.h"
#include "ops/registry.h"

namespace zc::runtime {

class CompiledFunction {
 public:
  // `fn` computes its results from the tensors it is given, as ordinary tensor code that reads
  // no values (it is traced).
  using Fn = std::function<std::vector<Tensor>(std::span<const Tensor> inputs)>;
  explicit CompiledFunction(Fn fn) : fn_(std::move(fn)) {}

  // fn(inputs), computed by a compiled graph: one per list of input metadata (shapes, dtypes,
  // devices), traced and compiled when such a list is first seen. Inputs are on one device
  // (0-dim CPU tensors aside); the graph runs on that device's backend.
  std::vector<Tensor> operator()(std::span<const Tensor> inputs);

 private:
  struct Variant {
    std::vector<ops::TensorMeta> metas;  // of the inputs it was compiled for
    std::shared_ptr<const codegen::Executable> exec;
    std::vector<size_t> order;  // graph input i is inputs[order[i]]
  };
  std::shared_ptr<const Variant> compile(std::span<const Tensor> inputs) const;

  Fn fn_;
  std::mutex mu_;
  std::vector<std::shared_ptr<const Variant>> variants_;
};

}  // namespace zc::runtime
