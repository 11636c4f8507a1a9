// The call path of a compiled module: guard check, then one run of the executable; on a guard
// miss, capture and compile first (guard_miss.cpp). What the parts of a compiled module share
// is declared in module_core.h.
#include <algorithm>
#include <cstdio>
#include <mutex>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/record.h"
#include "capture/capture.h"
#include "capture/trace_lock.h"
#include "nn/epoch.h"
#include "runtime/call/module_core.h"
#include "runtime/debug/accuracy_check.h"
#include "runtime/driver/code_cache.h"
#include "runtime/driver/compile_graph.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"
#include "zc/autocast.h"
#include "zc/autograd.h"
#include "zc/compile.h"

namespace zc {

std::shared_ptr<runtime::CompileContext> Core::new_context() const {
  auto ctx = std::make_shared<runtime::CompileContext>();
  ctx->set_who(roi->name());
  return ctx;
}

namespace module_core {

std::string inputs_str(std::span<const Tensor> inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    s += (i ? ", " : "") + shape_str(x.shape()) + " " + std::string(dtype_name(x.dtype())) +
         (x.is_contiguous() ? "" : " (non-contiguous)");
  }
  return inputs.size() > 1 ? "inputs " + s : "input " + s;
}

std::string_view call_tag() {
  const std::optional<DType> autocast = autocast_dtype();
  if (!autocast) return {};
  return *autocast == DType::bf16 ? "autocast bf16" : "autocast f16";
}

// Which graph inputs want gradients; empty when none does (or grad mode is off). Copies
// nothing when none does: inference calls run it too.
std::vector<bool> wanted_gradients(const Entry& e, std::span<const Tensor> xs) {
  if (!autograd::wants_grad(e.bound) && !autograd::wants_grad(xs)) return {};
  std::vector<bool> wanted;
  for (const Tensor& t : e.bound) wanted.push_back(autograd::requires_grad(t));
  for (const runtime::UserSlot& u : e.user_slots)
    wanted[u.slot] = autograd::requires_grad(xs[u.input]);
  return wanted;
}

// With `whole_step`, a training call also waits for its backward, which otherwise compiles
// while the forward runs.
void prepare(const Entry& e, const std::vector<bool>& wanted, bool whole_step,
             runtime::CompileContext& ctx) {
  if (!wanted.empty() && e.code->whole()) {
    auto plan = e.code->training(wanted, ctx);
    if (whole_step && plan->backward()) ctx.merge(plan->backward_report());
  } else {
    e.code->inference(ctx);
  }
}

namespace {

// A variant not compiled yet (a module's first training call after inference calls, or the
// other way round) compiles at its first call; its time is the module's compile time.
void compile_variant(Core& c, const Entry& e, const std::vector<bool>& wanted) {
  Timer t;
  std::shared_ptr<runtime::CompileContext> ctx = c.new_context();
  prepare(e, wanted, /*whole_step=*/false, *ctx);
  c.roi->add_compile(t.ms());
  ZC_LOG(timing) << c.roi->name() << ": a variant compiled at its first call in " << t.ms()
                 << " ms: " << ctx->report().str();
}

// A call: when autograd wants gradients of the call's inputs or parameters, the training
// forward runs and its outputs get the node that runs the compiled backward. A trace that
// broke has no whole graph to differentiate: its outputs refuse gradients with an error naming
// the module, rather than silently leaving the parameters without them.
std::vector<Tensor> run_entry(Core& c, const Entry& e, std::span<const Tensor> xs,
                              const std::vector<bool>& wanted) {
  const nn::Module& module = *c.module;
  if (!wanted.empty() && e.code->whole()) {
    std::shared_ptr<const runtime::TrainingPlan> plan = e.code->training_if_compiled(wanted);
    if (!plan) {
      compile_variant(c, e, wanted);
      plan = e.code->training_if_compiled(wanted);
    }
    return runtime::run_for_training(
        std::move(plan), runtime::call_inputs(e, xs, runtime::draw_seeds(e)), module.type_name());
  }
  std::shared_ptr<const runtime::Executable> exec = e.code->inference_if_compiled();
  if (!exec) {
    compile_variant(c, e, wanted);
    exec = e.code->inference_if_compiled();
  }
  std::vector<Tensor> outs = runtime::run_inference(e, *exec, xs);
  if (e.code->whole()) return outs;
  // The last segment's inputs are mostly values of earlier segments: whether gradients are
  // wanted is asked of the module's parameters and the inputs.
  std::vector<Tensor> sources = module.parameters();
  sources.insert(sources.end(), xs.begin(), xs.end());
  if (!autograd::wants_grad(sources)) return outs;
  autograd::record_opaque("compiled module " + module.type_name(),
                          "broke its trace into segments (a graph break), and gradients flow "
                          "only through a whole graph; call the module uncompiled to train it, "
                          "or remove the graph break (ZC_LOGS=graph shows where it is)",
                          sources, outs);
  return outs;
}

// CompileOptions::accuracy_check: the first calls of each specialization are compared with
// eager; the call returns `outs` either way.
std::vector<Tensor> checked(Core& c, const Entry& e, std::span<const Tensor> xs,
                            std::vector<Tensor> outs) {
  if (c.options.accuracy_check.calls > 0) {
    runtime::check_accuracy(c.options, e,
                            e.code->whole() ? e.accuracy_calls : c.broken_accuracy_calls, xs, outs,
                            *c.module);
  }
  return outs;
}

// The call path, for any number of inputs.
std::vector<Tensor> call(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs) {
  Core& c = *cp;
  std::shared_ptr<const Entry> hit;
  bool had_entries = false, eager_only = false;
  int64_t n = 0;
  {
    std::lock_guard lock(c.mu);
    drop_stale_entries(c);
    had_entries = !c.entries.empty();
    eager_only = c.eager_only;
    if (!c.retrace_always && !eager_only) hit = c.entries.find(xs, call_tag());
    if (hit) n = ++c.hits;
  }
  if (hit) return run_hit(c, *hit, xs, n);
  if (eager_only) return run_eager(c, xs, false);
  if (c.options.async_compile && !c.retrace_always) return call_async(cp, xs, had_entries);

  // Guard miss: capture. One capture per module at a time; a concurrent caller that waited
  // may find the entry the other one made.
  std::unique_lock capture_lock(c.capture_mu);
  {
    std::lock_guard lock(c.mu);
    if (!c.retrace_always) hit = c.entries.find(xs, call_tag());
  }
  if (hit) {
    capture_lock.unlock();
    return checked(c, *hit, xs, run_entry(c, *hit, xs, wanted_gradients(*hit, xs)));
  }
  const bool recapture = had_entries && !c.retrace_always;
  std::shared_ptr<runtime::CompileContext> ctx = c.new_context();
  Made made = compile_for(cp, xs, /*whole_step=*/recapture, recapture, *ctx);
  std::vector<Tensor> out = checked(c, *made.entry, xs, run_entry(c, *made.entry, xs, made.wanted));
  publish(c, made);
  return out;
}

}  // namespace

bool guards_match(const std::vector<capture::InputGuard>& guards, std::span<const Tensor> xs) {
  if (guards.size() != xs.size()) return false;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!capture::guard_matches(guards[i], capture::input_guard_hash(xs[i]), xs[i])) return false;
  }
  return true;
}

std::vector<Tensor> run_eager(Core& c, std::span<const Tensor> xs, bool sample) {
  zc::stats::add(zc::stats::Counter::eager_calls);
  Timer t;
  std::vector<Tensor> out;
  {
    // No capture may mark its parameters meanwhile.
    capture::EagerScope eager;
    out = (*c.module)(std::vector<Tensor>(xs.begin(), xs.end()));
  }
  c.roi->add_eager_call(t.ms(), sample);
  return out;
}

// Timed for the ROI report, or the module run eagerly when this is one of its ROI samples
// (and then, under roi_guard, the compiled code may be found not worth it).
std::vector<Tensor> run_hit(Core& c, const Entry& e, std::span<const Tensor> xs, int64_t n) {
  zc::stats::add(zc::stats::Counter::guard_hits);
  if (c.sample_eager && runtime::RoiRecord::is_sample(n)) {
    std::vector<Tensor> out = run_eager(c, xs, /*sample=*/true);
    ZC_LOG(roi) << c.roi->snapshot().str();
    if (c.options.roi_guard && c.roi->gain_is_negative()) {
      c.roi->give_up();
      {
        std::lock_guard lock(c.mu);
        c.eager_only = true;
      }
      std::fprintf(stderr, "[zc] roi_guard: %s\n", c.roi->snapshot().str().c_str());
    }
    return out;
  }
  Timer t;
  std::vector<Tensor> out = run_entry(c, e, xs, wanted_gradients(e, xs));
  c.roi->add_compiled_call(t.ms());
  return checked(c, e, xs, std::move(out));
}

// Under c.mu: forgets the compiled graphs that compiler::reset() dropped, or that a change of
// the module's structure (a parameter replaced, train/eval) made wrong.
void drop_stale_entries(Core& c) {
  uint64_t gen = runtime::code_cache_generation();
  if (gen != c.generation) {
    c.entries.clear();
    c.retrace_always = false;
    c.generation = gen;
  }
  uint64_t epoch = nn::module_epoch();
  if (epoch != c.epoch) {
    uint64_t fp = capture::module_fingerprint(*c.module);
    if (fp != c.fingerprint) c.entries.clear();
    c.fingerprint = fp;
    c.epoch = epoch;
  }
  // A tensor some trace read as a constant may want gradients now (requires_grad_ on a member
  // that is no registered parameter): its graph would leave it without them.
  const uint64_t grad_epoch = autograd::requires_grad_epoch();
  if (grad_epoch != c.grad_epoch) {
    c.entries.drop_if([](const Entry& e) {
      return std::any_of(e.constants_read.begin(), e.constants_read.end(), [](const auto& w) {
        const std::shared_ptr<TensorImpl> t = w.lock();
        return t && autograd::requires_grad(Tensor(t));
      });
    });
    c.grad_epoch = grad_epoch;
  }
}

}  // namespace module_core

using namespace module_core;

Tensor CompiledModule::operator()(const Tensor& x) const {
  if (!x.defined()) throw Error("compiled module: called with an undefined Tensor");
  // Inside another capture, a compiled module is traced through like any module call; inside
  // an eager run of an enclosing compiled module, it runs eagerly too.
  if (x.is_traced() || capture::in_eager_scope()) return (*state_->core->module)(x);
  std::vector<Tensor> out = call(state_->core, std::span<const Tensor>(&x, 1));
  if (out.size() != 1) {
    throw Error("compiled module " + state_->core->module->type_name() + ": its forward returns " +
                std::to_string(out.size()) +
                " tensors; call it with a std::vector<Tensor> to receive them all");
  }
  return std::move(out[0]);
}

std::vector<Tensor> CompiledModule::operator()(const std::vector<Tensor>& inputs) const {
  const Core& c = *state_->core;
  if (inputs.empty()) {
    throw Error("compiled module " + c.module->type_name() + ": called with no input tensors");
  }
  bool traced = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      throw Error("compiled module " + c.module->type_name() + ": input " + std::to_string(i) +
                  " is an undefined Tensor");
    }
    traced = traced || inputs[i].is_traced();
  }
  if (traced || capture::in_eager_scope()) return (*c.module)(inputs);
  return call(state_->core, inputs);
}

namespace {
class CompiledBlock final : public nn::Module {
 public:
  CompiledBlock(std::shared_ptr<nn::Module> inner, CompileOptions options)
      : inner_(register_module("module", std::move(inner))), fast_(compile(inner_, options)) {}
  Tensor forward(const Tensor& x) override { return fast_(x); }
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override { return fast_(inputs); }
  std::string type_name() const override { return inner_->type_name(); }

 private:
  std::shared_ptr<nn::Module> inner_;
  CompiledModule fast_;
};
}  // namespace

std::shared_ptr<nn::Module> compiled(std::shared_ptr<nn::Module> module, CompileOptions options) {
  if (!module) throw Error("compiled: the module is null");
  return std::make_shared<CompiledBlock>(std::move(module), std::move(options));
}

const std::shared_ptr<nn::Module>& CompiledModule::module() const {
  return state_->core->module;
}
const CompileOptions& CompiledModule::options() const {
  return state_->core->options;
}

CompiledModule compile(std::shared_ptr<nn::Module> module, CompileOptions options) {
  if (!module) throw Error("compile: the module is null");
  runtime::check_backend(options.backend);
  if (!(options.activation_memory_budget >= 0 && options.activation_memory_budget <= 1)) {
    throw Error(
        "compile: activation_memory_budget must be in [0, 1] (1: the default partition, "
        "0: the least activation memory), got " +
        std::to_string(options.activation_memory_budget));
  }
  if (options.dynamic != Dynamic::Static) {
    for (const DynamicDim& d : module->variable_dims()) {
      const bool marked =
          std::any_of(options.dynamic_dims.begin(), options.dynamic_dims.end(),
                      [&](const DynamicDim& m) { return m.input == d.input && m.dim == d.dim; });
      if (!marked) options.dynamic_dims.push_back(d);
    }
  }
  for (const DynamicDim& d : options.dynamic_dims) {
    if (d.max < std::max<int64_t>(d.min, 2)) {
      throw Error("compile: dynamic_dims for dim " + std::to_string(d.dim) + " has range [" +
                  std::to_string(d.min) + ", " + std::to_string(d.max) +
                  "]; a dynamic dim needs sizes of 2 or more (max >= max(min, 2))");
    }
  }
  auto core = std::make_shared<Core>();
  core->dynamic = runtime::DynamicShapes(options.dynamic, options.dynamic_dims);
  core->roi = runtime::new_roi_record(module->type_name());
  core->sample_eager = options.roi_sampling || options.roi_guard || runtime::roi_logging();
  core->module = std::move(module);
  core->options = std::move(options);
  core->options.accuracy_check = runtime::resolve_accuracy_check(core->options.accuracy_check);
  auto state = std::make_shared<CompiledModule::State>();
  state->core = std::move(core);
  return CompiledModule(std::move(state));
}

}  // namespace zc
