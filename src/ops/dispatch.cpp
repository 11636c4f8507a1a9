#include "ops/dispatch.h"

#include "ops/shape_rules.h"
#include "util/check.h"

namespace zc::ops {

namespace {
thread_local OpInterceptor* tl_interceptor = nullptr;
}  // namespace

OpInterceptor* current_interceptor() {
  return tl_interceptor;
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
  if (traced) {
    if (tl_interceptor) return tl_interceptor->intercept(def, inputs, attrs);
    op_error(def.name,
             "a traced tensor was used outside the capture that created it (did a "
             "traced tensor escape forward()?)");
  }
  std::vector<TensorMeta> metas;
  metas.reserve(n);
  for (const Tensor& t : inputs) {
    if (!t.device().is_cpu()) {
      op_error(def.name, "tensors on " + t.device().str() +
                             " are not supported by this build (no CUDA backend yet)");
    }
    metas.push_back(meta_of(t));
  }
  std::vector<TensorMeta> outs = infer_outputs(def, metas, attrs);
  return def.eager(inputs, attrs, outs);
}

Tensor call1(OpId id, std::span<const Tensor> inputs, const Attrs& attrs) {
  std::vector<Tensor> out = call(id, inputs, attrs);
  ZC_CHECK(out.size() == 1, "op " << op_def(id).name << " returned " << out.size() << " outputs");
  return std::move(out[0]);
}

}  // namespace zc::ops
