// An Executable: a compiled graph ready to run. Immutable once built, so one instance serves
// every module instance with the same graph and every thread at once.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "zc/tensor.h"

namespace zc::runtime {

class Executable {
 public:
  virtual ~Executable() = default;
  // inputs[i] is the value of graph input i (any strides); returns the graph's outputs.
  virtual std::vector<Tensor> run(std::span<const Tensor* const> inputs) const = 0;
  virtual std::string_view backend() const = 0;
};

}  // namespace zc::runtime
