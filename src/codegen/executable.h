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
  // Where its inputs, outputs and scratch memory live.
  virtual Device device() const { return Device::cpu(); }
};

// An executable that can also run on raw buffers the caller owns, without allocating: what a
// hierarchical executable chains its calls through, and what a GPU's graph capture records.
// The buffers are on device(): host memory, or device addresses for a GPU.
class RawExecutable : public Executable {
 public:
  // Whether run_raw is available: a composite of executables is raw only when all of its parts
  // are, on one device.
  virtual bool can_run_raw() const { return true; }
  // Bytes of scratch memory run_raw needs (64-byte aligned by the caller).
  virtual int64_t scratch_bytes() const = 0;
  // `inputs[i]` holds graph input i densely (row-major, its dtype); `outputs[i]` receives graph
  // output i densely; `scratch` has scratch_bytes() bytes. On a GPU the work is queued on the
  // device's current stream, and nothing in it waits for the GPU or allocates. Raises
  // zc::Error like run().
  virtual void run_raw(void* const* inputs, void* const* outputs, char* scratch) const = 0;
  // Called once after run_raw (or a replay of what it queued) and before its outputs are used:
  // raises the error its kernels flagged on the device (an embedding index out of range),
  // which waits for the GPU. Nothing to do where errors raise at once (the CPU).
  virtual void finish_run() const {}
};

}  // namespace zc::codegen
