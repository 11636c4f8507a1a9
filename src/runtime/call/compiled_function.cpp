#include "runtime/call/compiled_function.h"

#include <algorithm>

#include "cache/cache.h"
#include "capture/capture.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/records/call_record.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/autograd.h"

namespace zc::runtime {

namespace {

// A tensor with `m`'s metadata and no data, to trace with: a trace reads no values, and the
// compile it feeds sees the graph alone.
Tensor stand_in(const ops::TensorMeta& m) {
  const size_t bytes = static_cast<size_t>(shape_numel(m.shape)) * dtype_size(m.dtype);
  Tensor t = Tensor::view_of(Storage::borrow(nullptr, bytes, m.device), m.shape,
                             contiguous_strides(m.shape), 0, m.dtype);
  t.unsafe_impl()->wrapped_number = m.wrapped_number;
  return t;
}

}  // namespace

CompiledFunction::~CompiledFunction() {
  if (prepared_.valid()) prepared_.wait();
}

std::shared_ptr<const CompiledFunction::Variant> CompiledFunction::compile(
    std::span<const Tensor> inputs) const {
  Timer timer;
  // Distinct handles for the trace: marking the caller's tensors would make them traced while
  // the trace lasts.
  std::vector<Tensor> stand_ins;
  for (const Tensor& t : inputs) stand_ins.push_back(t.detach());
  capture::Captured cap = capture::capture_function(stand_ins, [&] { return fn_(stand_ins); });
  auto v = std::make_shared<Variant>();
  for (const capture::InputBinding& b : cap.bindings) {
    if (b.kind == ir::InputKind::seed) {
      throw Error(
          "compiled function: it draws random numbers (zc::rand_like or randn_like), which a "
          "compiled "
          "module draws anew on every call and a compiled function does not; compile "
          "it as a module (zc::compile of an nn::Module) or draw outside the function");
    }
    size_t i = 0;
    while (i < stand_ins.size() && stand_ins[i].unsafe_impl() != b.tensor.unsafe_impl()) ++i;
    ZC_CHECK(i < stand_ins.size(), "a compiled function read a tensor it was not given");
    v->order.push_back(i);
  }
  Device device = Device::cpu();
  for (const Tensor& t : inputs) {
    if (!t.device().is_cpu()) device = t.device();
  }
  v->exec = compile_graph(cap.graph, resolve_backend("auto", device));
  v->metas = call_metas(inputs);
  ZC_LOG(timing) << "compiled function: " << timer.ms() << " ms, " << cap.graph.nodes.size()
                 << " nodes";
  return v;
}

std::shared_ptr<const CompiledFunction::Variant> CompiledFunction::find(
    const std::vector<ops::TensorMeta>& metas) const {
  for (const auto& v : variants_) {
    if (v->metas == metas) return v;
  }
  return nullptr;
}

std::vector<Tensor> CompiledFunction::operator()(std::span<const Tensor> inputs) {
  std::shared_ptr<const Variant> found;
  {
    std::unique_lock lock(mu_);
    const std::vector<ops::TensorMeta> metas = call_metas(inputs);
    found = find(metas);
    if (!found && prepared_.valid() &&
        std::find(preparing_.begin(), preparing_.end(), metas) != preparing_.end()) {
      lock.unlock();
      prepared_.wait();
      lock.lock();
      found = find(metas);
    }
    if (!found) {
      found = compile(inputs);
      variants_.push_back(found);
    }
    if (!found->recorded) record(*found);
  }
  std::vector<const Tensor*> args;
  args.reserve(found->order.size());
  for (size_t i : found->order) args.push_back(&inputs[i]);
  return found->exec->run(args);
}

// Under mu_, at each variant's first call: writes the record if that call changes it (a variant
// not first in it); so calls that alternate between variants write it once each, not every call.
void CompiledFunction::record(const Variant& v) {
  v.recorded = true;
  if (context_.empty() || (!recorded_.empty() && recorded_.front() == v.metas)) return;
  recorded_ = note_call(recorded_, v.metas);
  try {
    cache::process_cache().put(call_record_key(name_, context_), encode_call_record(recorded_), 0);
  } catch (const std::exception& e) {
    ZC_LOG(cache) << "compiled function " << name_ << ": call record not written: " << e.what();
  }
}

void CompiledFunction::prepare(std::string context) {
  if (name_.empty()) return;
  std::lock_guard lock(mu_);
  if (!context_.empty()) return;
  context_ = std::move(context);
  try {
    if (auto e = cache::process_cache().get(call_record_key(name_, context_))) {
      recorded_ = decode_call_record(e->payload);
    }
  } catch (const std::exception& e) {
    ZC_LOG(cache) << "compiled function " << name_ << ": call record unusable: " << e.what();
    recorded_.clear();
  }
  for (const auto& metas : recorded_) {
    if (!find(metas)) preparing_.push_back(metas);
  }
  if (preparing_.empty()) return;
  try {
    prepared_ = std::async(std::launch::async, [this] { prepare_recorded(preparing_); }).share();
  } catch (const std::system_error&) {
    preparing_.clear();  // no thread to spare: the first call compiles
  }
}

// On the background thread. preparing_ does not change while it runs.
void CompiledFunction::prepare_recorded(const std::vector<std::vector<ops::TensorMeta>>& calls) {
  NoGradGuard no_grad;  // as a call from an optimizer step
  Timer timer;
  for (const auto& metas : calls) {
    try {
      std::vector<Tensor> inputs;
      for (const ops::TensorMeta& m : metas) inputs.push_back(stand_in(m));
      std::shared_ptr<const Variant> v = compile(inputs);
      std::lock_guard lock(mu_);
      if (!find(metas)) variants_.push_back(std::move(v));
    } catch (const std::exception& e) {
      ZC_LOG(cache) << "compiled function " << name_
                    << ": a recorded call not prepared: " << e.what();
    }
  }
  ZC_LOG(timing) << "compiled function " << name_ << ": " << calls.size()
                 << " recorded call(s) prepared in " << timer.ms() << " ms";
}

}  // namespace zc::runtime
