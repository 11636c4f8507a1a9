// An Executable: a compiled graph ready to run. Immutable once built, so one instance serves
// every module instance with the same graph and every thread at once.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "zc/tensor.h"

namespace zc::codegen {

class Executable {
 public:
  virtual ~Executable() = default;
  // inputs[i] is the value of graph input i (any strides); returns the graph's outputs.
  virtual std::vector<Tensor> run(std::span<const Tensor* const> inputs) const = 0;
  virtual std::string_view backend() const = 0;
};

// An executable that can also run on raw buffers the caller owns, without allocating: what a
// hierarchical executable chains its calls through.
class RawExecutable : public Executable {
 public:
  // Bytes of scratch memory run_raw needs (64-byte aligned by the caller).
  virtual int64_t scratch_bytes() const = 0;
  // `inputs[i]` holds graph input i densely (row-major, its dtype); `outputs[i]` receives graph
  // output i densely; `scratch` has scratch_bytes() bytes. Raises zc::Error like run().
  virtual void run_raw(void* const* inputs, void* const* outputs, char* scratch) const = 0;
};

}  // namespace zc::codegen
