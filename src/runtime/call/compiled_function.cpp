#include "runtime/call/compiled_function.h"

#include <algorithm>

#include "cache/cache.h"
#include "capture/capture.h"
#include "runtime/driver/compile.h"
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

// Contiguous copies of the strided ones among `inputs`, in `dense`: code is made for contiguous
// inputs (its executable would copy a strided one the same way).
std::span<const Tensor> contiguous_inputs(std::span<const Tensor> inputs,
                                          std::vector<Tensor>& dense) {
  bool all = true;
  for (const Tensor& t : inputs) all = all && t.is_contiguous();
  if (all) return inputs;
  for (const Tensor& t : inputs) dense.push_back(t.is_contiguous() ? t : t.contiguous());
  return dense;
}

}  // namespace

CompiledFunction::~CompiledFunction() {
  if (prepared_.valid()) prepared_.wait();
}

std::shared_ptr<const Specialization> CompiledFunction::compile(
    std::span<const Tensor> inputs) const {
  Timer timer;
  // Distinct handles for the trace: marking the caller's tensors would make them traced while
  // the trace lasts.
  std::vector<Tensor> stand_ins;
  for (const Tensor& t : inputs) stand_ins.push_back(t.detach());
  capture::Captured cap = capture::capture_function(stand_ins, [&] { return fn_(stand_ins); });
  auto s = std::make_shared<Specialization>();
  for (const Tensor& t : inputs) s->guards.push_back(capture::input_guard(t));
  for (size_t slot = 0; slot < cap.bindings.size(); ++slot) {
    const capture::InputBinding& b = cap.bindings[slot];
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
    s->bound.emplace_back();
    s->user_slots.push_back({slot, i});
  }
  Device device = Device::cpu();
  for (const Tensor& t : inputs) {
    if (!t.device().is_cpu()) device = t.device();
  }
  const Backend& backend = resolve_backend("auto", device);
  CompileContext ctx;
  ctx.set_who(name_.empty() ? "compiled function" : "compiled function " + name_);
  std::shared_ptr<const Executable> exec = runtime::compile({cap.graph, backend}, ctx).exec;
  const size_t nodes = cap.graph.nodes.size();
  s->code = GraphVariants::made(std::move(cap.graph), backend, std::move(exec));
  ZC_LOG(timing) << ctx.who() << ": " << timer.ms() << " ms, " << nodes << " nodes; "
                 << ctx.report().str();
  return s;
}

std::shared_ptr<const Specialization> CompiledFunction::find(
    const std::vector<ops::TensorMeta>& metas) const {
  std::vector<Tensor> stand_ins;
  for (const ops::TensorMeta& m : metas) stand_ins.push_back(stand_in(m));
  return table_.find(stand_ins);
}

std::vector<Tensor> CompiledFunction::operator()(std::span<const Tensor> given) {
  std::vector<Tensor> dense;
  const std::span<const Tensor> inputs = contiguous_inputs(given, dense);
  std::shared_ptr<const Specialization> found;
  {
    std::unique_lock lock(mu_);
    found = table_.find(inputs);
    const std::vector<ops::TensorMeta> metas = call_metas(inputs);
    if (!found && prepared_.valid() &&
        std::find(preparing_.begin(), preparing_.end(), metas) != preparing_.end()) {
      lock.unlock();
      prepared_.wait();
      lock.lock();
      found = table_.find(inputs);
    }
    if (!found) {
      found = compile(inputs);
      table_.add(found);
    }
    if (!recorded_calls_.count(found.get())) record(*found, metas);
  }
  return run_inference(*found, *found->code->inference_if_compiled(), inputs);
}

// Under mu_, at each specialization's first call: writes the record if that call changes it (a
// specialization not first in it); so calls that alternate between specializations write it
// once each, not every call.
void CompiledFunction::record(const Specialization& s, const std::vector<ops::TensorMeta>& metas) {
  recorded_calls_.insert(&s);
  if (context_.empty() || (!recorded_.empty() && recorded_.front() == metas)) return;
  recorded_ = note_call(recorded_, metas);
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
      std::shared_ptr<const Specialization> s = compile(inputs);
      std::lock_guard lock(mu_);
      if (!find(metas)) table_.add(std::move(s));
    } catch (const std::exception& e) {
      ZC_LOG(cache) << "compiled function " << name_
                    << ": a recorded call not prepared: " << e.what();
    }
  }
  ZC_LOG(timing) << "compiled function " << name_ << ": " << calls.size()
                 << " recorded call(s) prepared in " << timer.ms() << " ms";
}

}  // namespace zc::runtime
