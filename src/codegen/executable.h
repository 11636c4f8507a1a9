// An Executable: a compiled graph ready to run. Immutable once built, so one instance serves
// every module instance with the same graph and every thread at once.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpu/gemm_choice.h"
#include "zc/error.h"
#include "zc/tensor.h"

namespace zc::codegen {

// A product an executable hands to a library, at call site `site` (for the C++ backend, the
// index of the kernel that makes it).
struct LibraryProduct {
  int32_t site = 0;
  cpu::GemmProblem problem;
};

// What holds a graph input's memory in one call: an owned storage's uid and version
// (Storage::uid), or storage 0 where that is not known (a dense copy of a strided input, a
// value computed by an earlier part of the graph, borrowed memory). An executable that keeps
// something derived from an input across calls (a convolution's weights in its kernel's
// blocked layout) reuses it only while the input's identity stays the same.
struct InputIdentity {
  uint64_t storage = 0;
  uint64_t version = 0;
  bool known() const { return storage != 0; }
  bool operator==(const InputIdentity&) const = default;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // inputs[i] is the value of graph input i (any strides); returns the graph's outputs.
  virtual std::vector<Tensor> run(std::span<const Tensor* const> inputs) const = 0;
  // run(), with the host outputs from index `together_from` on in one allocation (views of
  // one storage): a training forward's saved values, which live and die together, one
  // allocation a call instead of one each. Executables that allocate their outputs
  // themselves honor it; the others run as run() does.
  virtual std::vector<Tensor> run_together_from(std::span<const Tensor* const> inputs,
                                                size_t together_from) const {
    (void)together_from;
    return run(inputs);
  }
  virtual std::string_view backend() const = 0;
  // Where its inputs, outputs and scratch memory live.
  virtual Device device() const { return Device::cpu(); }

  // Mode::MaxAutotune (runtime/products/autotune.h). The library products this executable makes
  // that a choice can change (none where the backend has no choices, or where the code serves many
  // sizes: its problems change from call to call).
  virtual std::vector<LibraryProduct> library_products() const { return {}; }
  // How each site's product runs (cpu/gemm_choice.h codes, by site; 0 the default).
  virtual std::vector<uint8_t> product_choices() const { return {}; }
  // An executable like this one, sharing its code, whose products run as `choices` (by site,
  // as product_choices()) say. Only called when product_choices() is not empty.
  virtual std::shared_ptr<const Executable> with_product_choices(
      std::vector<uint8_t> choices) const {
    (void)choices;
    throw Error("a " + std::string(backend()) + " executable has no library products to tune");
  }
  // MatmulPrecision::Tf32: an executable like this one, sharing its code, whose f32 library
  // work (a GPU's products and convolutions) may round operands to TF32; null where it has
  // none (the CPU, the interpreter, a graph without such work).
  virtual std::shared_ptr<const Executable> with_tf32() const { return nullptr; }
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
  // zc::Error like run(). `identities`, when given, says what holds each input
  // (InputIdentity); without it nothing derived from an input is reused from an earlier call.
  virtual void run_raw(void* const* inputs, void* const* outputs, char* scratch,
                       const InputIdentity* identities = nullptr) const = 0;
  // Whether run_raw uses `identities`: callers describe their inputs only then (a call's
  // cost otherwise).
  virtual bool reads_identities() const { return false; }
  // Called once after run_raw (or a replay of what it queued) and before its outputs are used:
  // raises the error its kernels flagged on the device (an embedding index out of range),
  // which waits for the GPU. Nothing to do where errors raise at once (the CPU).
  virtual void finish_run() const {}
  // Pairs (input i, output j) that run_raw may be given one buffer for: output j is written
  // only by the last reader of input i, which reads each element before it writes it there (a
  // convolution adding its residual, codegen/buffer_plan.h). A caller whose input i dies at
  // this call passes its buffer as output j too, and saves the copy and the memory.
  virtual std::vector<std::pair<size_t, size_t>> outputs_over_inputs() const { return {}; }
};

}  // namespace zc::codegen
