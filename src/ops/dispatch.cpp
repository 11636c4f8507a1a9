#include "ops/dispatch.h"

#include <atomic>

#include "autograd/record.h"
#include "cpu/threads.h"
#include "ops/autocast.h"
#include "ops/shape_rules.h"
#include "util/check.h"
#include "zc/ops.h"

namespace zc::ops {

namespace {
thread_local OpInterceptor* tl_interceptor = nullptr;

std::atomic<DeviceKernels*>& device_kernels(Device::Type type) {
  static std::atomic<DeviceKernels*> cuda{nullptr};
  ZC_CHECK(type == Device::Type::cuda, "no kernels for device type " << static_cast<int>(type));
  return cuda;
}
}  // namespace

void set_device_kernels(Device::Type type, DeviceKernels* kernels) {
  device_kernels(type).store(kernels, std::memory_order_release);
}

Device call_device(std::string_view name, std::span<const Tensor> inputs) {
  const Tensor* on = nullptr;  // the first tensor not on the CPU
  for (const Tensor& t : inputs) {
    if (!t.device().is_cpu()) {
      on = &t;
      break;
    }
  }
  if (!on) return Device::cpu();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    bool number = t.device().is_cpu() && t.dim() == 0;
    if (t.device() != on->device() && !number) {
      op_error(name, "expected every tensor on " + on->device().str() + ", but input " +
                         std::to_string(i) + " is on " + t.device().str() +
                         " (move it with .to(...); only 0-dim CPU tensors mix with other devices)");
    }
  }
  return on->device();
}

namespace {

// The op computed on the CPU on copies of `inputs`, its results moved to `device` (see
// OpInterceptor::untraced_on_host). A 0-dim number stays one.
std::vector<Tensor> on_host(OpId id, std::span<const Tensor> inputs, const Attrs& attrs,
                            Device device) {
  std::vector<Tensor> host;
  host.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    host.push_back(t.to(Device::cpu()));
    host.back().unsafe_impl()->wrapped_number = t.unsafe_impl()->wrapped_number;
  }
  std::vector<Tensor> results = call(id, host, attrs);
  for (Tensor& r : results) r = r.to(device);
  return results;
}

}  // namespace

Tensor OpInterceptor::random_like(OpId op, const Tensor&) {
  throw Error(std::string(op_def(op).name) +
              ": random draws are recorded only by a capture of forward()");
}

void OpInterceptor::update_in_place(const Tensor&, const Tensor&) {
  throw Error(
      "index_copy_: an in-place update of a traced tensor is recorded only by a capture "
      "of forward()");
}

OpInterceptor* current_interceptor() {
  return tl_interceptor;
}

void note_random_draw(std::string_view factory) {
  if (tl_interceptor) tl_interceptor->draw_random(factory);
}

InterceptorScope::InterceptorScope(OpInterceptor* interceptor) : previous_(tl_interceptor) {
  tl_interceptor = interceptor;
}
InterceptorScope::~InterceptorScope() {
  tl_interceptor = previous_;
}

RegionScope::RegionScope(std::string_view type_name, const void* module)
    : interceptor_(tl_interceptor) {
  if (interceptor_) interceptor_->enter_region(type_name, module);
}
RegionScope::~RegionScope() {
  if (interceptor_) interceptor_->exit_region();
}

std::vector<Tensor> call(OpId id, std::span<const Tensor> inputs, const Attrs& attrs) {
  const OpDef& def = op_def(id);
  int n = static_cast<int>(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    op_error(def.name, "takes " + std::to_string(def.min_inputs) +
                           (def.max_inputs == def.min_inputs
                                ? ""
                                : " to " + (def.max_inputs < 0 ? std::string("any number of")
                                                               : std::to_string(def.max_inputs))) +
                           " inputs, got " + std::to_string(n));
  }
  ZC_CHECK(attrs.index() == def.attrs_index, "op " << def.name << " got the wrong attributes");
  bool traced = false;
  for (int i = 0; i < n; ++i) {
    if (!inputs[i].defined()) {
      op_error(def.name, "input " + std::to_string(i) + " is an undefined Tensor");
    }
    traced = traced || inputs[i].is_traced();
  }
  // Autocast (zc/autocast.h): the op again on its floating inputs cast, eagerly and traced
  // alike, so that a compiled graph records the casts eager autocast makes.
  if (const std::optional<DType> to = autocast_target(id, inputs)) {
    std::vector<Tensor> cast_inputs(inputs.begin(), inputs.end());
    for (Tensor& t : cast_inputs) {
      const DType d = t.dtype();
      if ((d == DType::f32 || d == DType::bf16 || d == DType::f16) && d != *to) t = cast(t, *to);
    }
    return call(id, cast_inputs, attrs);
  }
  if (traced) {
    if (tl_interceptor) return tl_interceptor->intercept(def, inputs, attrs);
    op_error(def.name,
             "a traced tensor was used outside the capture that created it (did a "
             "traced tensor escape forward()?)");
  }
  // Traced calls skip this: a concrete tensor a traced call meets becomes a graph constant,
  // which a compiled graph places on its device itself.
  const Device device = call_device(def.name, inputs);
  std::vector<TensorMeta> metas;
  metas.reserve(n);
  for (const Tensor& t : inputs) metas.push_back(meta_of(t));
  std::vector<TensorMeta> outs = infer_outputs(def, metas, attrs);
  std::vector<Tensor> results;
  if (!device.is_cpu() && tl_interceptor && !is_view(id) && !autograd::wants_grad(inputs) &&
      tl_interceptor->untraced_on_host(def, inputs, outs)) {
    return on_host(id, inputs, attrs, device);
  }
  if (device.is_cpu()) {
    cpu::CpuCallShare share;
    share.refresh();
    results = def.eager(inputs, attrs, outs);
  } else {
    DeviceKernels* kernels = device_kernels(device.type).load(std::memory_order_acquire);
    if (!kernels) {
      op_error(def.name, "tensors on " + device.str() +
                             " need the CUDA backend, which this build of zerocompile lacks (it "
                             "was built without the CUDA toolkit's headers)");
    }
    results = kernels->run(def, inputs, attrs, outs);
  }
  if (!def.stops_gradient && autograd::wants_grad(inputs))
    autograd::record_op(def, inputs, attrs, results);
  return results;
}

Tensor call1(OpId id, std::span<const Tensor> inputs, const Attrs& attrs) {
  std::vector<Tensor> out = call(id, inputs, attrs);
  ZC_CHECK(out.size() == 1, "op " << op_def(id).name << " returned " << out.size() << " outputs");
  return std::move(out[0]);
}

}  // namespace zc::ops
