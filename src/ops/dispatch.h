// The one entry point of every op call, and the hook capture uses to trace.
//
// call() validates the inputs with the op's shape rule and runs its eager kernel, unless an
// interceptor is installed on this thread and an input is traced: then the interceptor (the
// capture stage's tracer) records the call and returns traced outputs. Ops never know about
// capture; capture installs itself here.
//
// Devices: an op runs on the device of its tensors. Every tensor of a call is on one device,
// except 0-dim CPU tensors (numbers), which go with any device, as in torch. CPU ops run the
// registry's eager kernels; another device's ops run through the DeviceKernels its runtime
// installs (for CUDA, compiled graphs of the one op), which ops know nothing more about.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "ops/registry.h"

namespace zc::ops {

class OpInterceptor {
 public:
  virtual ~OpInterceptor() = default;
  virtual std::vector<Tensor> intercept(const OpDef& op, std::span<const Tensor> inputs,
                                        const Attrs& attrs) = 0;
  // A module call begins/ends (Module::operator()); `module` identifies the instance.
  virtual void enter_region(std::string_view type_name, const void* module) = 0;
  virtual void exit_region() = 0;
  // A random factory (rand, randn, randint) draws from the process generator while this
  // interceptor is installed. A capture refuses: its graph would replay one draw on every call.
  virtual void draw_random(std::string_view) {}
  // zc::rand_like(x) or randn_like(x) (`op` rand_like or randn_like) while this interceptor is
  // installed: a capture records the op with a seed that each call draws (ops/random_like.cpp);
  // nothing else records one.
  virtual Tensor random_like(OpId op, const Tensor& x);
  // Whether an op whose inputs are all untraced, on a device other than the CPU, computes on
  // the CPU instead while this interceptor is installed (its inputs copied there, its results
  // back). A capture says yes for small ones: the result is a constant of the graph either way,
  // and on a GPU an op's first call costs a compile of its own (30-40 ms of NVRTC each: a
  // BERT's attention mask, built from constants, cost ten of them at its capture).
  // index_copy_(self, ...) on a traced `self`: `updated` (the op's traced result) is self's
  // value from now on. A capture records it as an update of the buffer `self` is (applied once
  // per call, after the graph ran); the default refuses.
  virtual void update_in_place(const Tensor& self, const Tensor& updated);
  virtual bool untraced_on_host(const OpDef&, std::span<const Tensor> /*inputs*/,
                                std::span<const TensorMeta> /*outputs*/) const {
    return false;
  }
};

// The interceptor of the calling thread, or nullptr.
OpInterceptor* current_interceptor();

// Tells the interceptor of this thread, if any, that `factory` draws random numbers.
void note_random_draw(std::string_view factory);

// Installs an interceptor on this thread for its lifetime (restoring the previous one).
class InterceptorScope {
 public:
  explicit InterceptorScope(OpInterceptor* interceptor);
  ~InterceptorScope();
  InterceptorScope(const InterceptorScope&) = delete;
  InterceptorScope& operator=(const InterceptorScope&) = delete;

 private:
  OpInterceptor* previous_;
};

// Marks a module call as a region for the interceptor of this thread, if any.
class RegionScope {
 public:
  RegionScope(std::string_view type_name, const void* module);
  ~RegionScope();
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  OpInterceptor* interceptor_;
};

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;
  // Runs `op` on `inputs` (valid by the shape rule; each on the device, or a 0-dim CPU tensor)
  // producing `outputs` (the shape rule's answer, on the device).
  virtual std::vector<Tensor> run(const OpDef& op, std::span<const Tensor> inputs,
                                  const Attrs& attrs, std::span<const TensorMeta> outputs) = 0;
};

// Installs the kernels of a device type for the life of the process (its runtime does so once,
// when libzc is loaded); null uninstalls.
void set_device_kernels(Device::Type type, DeviceKernels* kernels);

// The device a call of op `name` on `inputs` runs on; raises zc::Error naming the inputs'
// devices when they are not one device (0-dim CPU tensors aside).
Device call_device(std::string_view name, std::span<const Tensor> inputs);

std::vector<Tensor> call(OpId id, std::span<const Tensor> inputs, const Attrs& attrs = NoAttrs{});
Tensor call1(OpId id, std::span<const Tensor> inputs, const Attrs& attrs = NoAttrs{});
inline Tensor call1(OpId id, std::initializer_list<Tensor> inputs, const Attrs& attrs = NoAttrs{}) {
  return call1(id, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

}  // namespace zc::ops
