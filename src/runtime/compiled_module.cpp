// The call path of a compiled module: guard check, then one run of the executable; on a guard
// miss, capture and compile first.
#include <future>
#include <mutex>

#include "autograd/node.h"
#include "autograd/record.h"
#include "capture/capture.h"
#include "capture/guards.h"
#include "ir/canonical.h"
#include "nn/epoch.h"
#include "runtime/accuracy_check.h"
#include "runtime/code_cache.h"
#include "runtime/compile_graph.h"
#include "runtime/dynamic_shapes.h"
#include "runtime/hierarchical.h"
#include "runtime/specialization_table.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"
#include "zc/compile.h"

namespace zc {

using runtime::Backend;
using Entry = runtime::Specialization;

struct CompiledModule::State {
  std::shared_ptr<nn::Module> module;
  CompileOptions options;  // options.backend as asked: resolved per input device at capture

  std::mutex mu;  // guards the fields below; never held while running user code or kernels
  runtime::SpecializationTable entries;
  bool retrace_always = false;  // the trace broke: every call traces again
  uint64_t epoch = 0;
  uint64_t fingerprint = 0;
  uint64_t generation = 0;
  std::mutex capture_mu;  // one capture at a time per module: it marks shared parameters
  runtime::DynamicShapes dynamic{Dynamic::Auto, {}};  // under capture_mu
  // Accuracy-checked calls of a trace that broke, whose specializations are never kept.
  std::atomic<int64_t> broken_accuracy_calls{0};
};

namespace {

std::string inputs_str(std::span<const Tensor> inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    s += (i ? ", " : "") + shape_str(x.shape()) + " " + std::string(dtype_name(x.dtype())) +
         (x.is_contiguous() ? "" : " (non-contiguous)");
  }
  return inputs.size() > 1 ? "inputs " + s : "input " + s;
}

// The call's graph inputs: the bound values, with the call's inputs in the user slots.
std::vector<Tensor> entry_inputs(const Entry& e, std::span<const Tensor> xs) {
  std::vector<Tensor> inputs = e.bound;
  for (const runtime::UserSlot& u : e.user_slots) inputs[u.slot] = xs[u.input];
  return inputs;
}

// Which graph inputs want gradients; empty when none does (or grad mode is off). Copies
// nothing when none does: inference calls run it too.
std::vector<bool> wanted_gradients(const Entry& e, std::span<const Tensor> xs) {
  if (!autograd::wants_grad(e.bound) && !autograd::wants_grad(xs)) return {};
  std::vector<bool> wanted;
  for (const Tensor& t : entry_inputs(e, xs)) wanted.push_back(autograd::requires_grad(t));
  return wanted;
}

// Compiles what a call with these wanted gradients runs, if it is not compiled yet.
// With `whole_step`, a training call also waits for its backward, which otherwise compiles
// while the forward runs.
void prepare(const Entry& e, const std::vector<bool>& wanted, bool whole_step) {
  if (!wanted.empty() && e.code->whole()) {
    auto plan = e.code->training(wanted);
    if (whole_step) (void)plan->backward();
  } else {
    e.code->inference();
  }
}

// A call: when autograd wants gradients of the call's inputs or parameters, the training
// forward runs and its outputs get the node that runs the compiled backward. A trace that
// broke has no whole graph to differentiate: its outputs refuse gradients with an error naming
// the module, rather than silently leaving the parameters without them.
std::vector<Tensor> run_entry(const Entry& e, std::span<const Tensor> xs,
                              const std::vector<bool>& wanted, const nn::Module& module) {
  if (!wanted.empty() && e.code->whole()) {
    return runtime::run_for_training(e.code->training(wanted), entry_inputs(e, xs),
                                     module.type_name());
  }
  std::vector<const Tensor*> args(e.bound.size());
  for (size_t i = 0; i < e.bound.size(); ++i) args[i] = &e.bound[i];
  for (const runtime::UserSlot& u : e.user_slots) args[u.slot] = &xs[u.input];
  std::vector<Tensor> outs = e.code->inference()->run(args);
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

std::vector<Tensor> run_entry(const Entry& e, std::span<const Tensor> xs,
                              const nn::Module& module) {
  return run_entry(e, xs, wanted_gradients(e, xs), module);
}

std::vector<Tensor> run_segment(const ir::Graph& g, std::span<const Tensor> inputs,
                                const Backend& backend) {
  auto exec = runtime::compile_graph(g, backend);
  std::vector<const Tensor*> args;
  for (const Tensor& t : inputs) args.push_back(&t);
  return exec->run(args);
}

// CompileOptions::accuracy_check: the first calls of each specialization are compared with
// eager; the call returns `outs` either way.
std::vector<Tensor> checked(CompiledModule::State& s, const Entry& e, std::span<const Tensor> xs,
                            std::vector<Tensor> outs) {
  if (s.options.accuracy_check.calls > 0) {
    runtime::check_accuracy(s.options, e,
                            e.code->whole() ? e.accuracy_calls : s.broken_accuracy_calls, xs, outs,
                            *s.module);
  }
  return outs;
}

// The device the call runs on: that of its first input not on the CPU, else the CPU. Inputs
// on two different accelerators are refused.
Device call_device(std::span<const Tensor> xs, const nn::Module& module) {
  Device device = Device::cpu();
  for (const Tensor& x : xs) {
    if (x.device().is_cpu()) continue;
    if (!device.is_cpu() && device != x.device()) {
      throw Error("compiled module " + module.type_name() + ": its inputs are on " + device.str() +
                  " and " + x.device().str() +
                  "; a call runs on one device (move the inputs with .to())");
    }
    device = x.device();
  }
  return device;
}

// The call path, for any number of inputs.
std::vector<Tensor> call(CompiledModule::State& s, std::span<const Tensor> xs);

}  // namespace

Tensor CompiledModule::operator()(const Tensor& x) const {
  if (!x.defined()) throw Error("compiled module: called with an undefined Tensor");
  // Inside another capture, a compiled module is traced through like any module call.
  if (x.is_traced()) return (*state_->module)(x);
  std::vector<Tensor> out = call(*state_, std::span<const Tensor>(&x, 1));
  if (out.size() != 1) {
    throw Error("compiled module " + state_->module->type_name() + ": its forward returns " +
                std::to_string(out.size()) +
                " tensors; call it with a std::vector<Tensor> to receive them all");
  }
  return std::move(out[0]);
}

std::vector<Tensor> CompiledModule::operator()(const std::vector<Tensor>& inputs) const {
  if (inputs.empty()) {
    throw Error("compiled module " + state_->module->type_name() +
                ": called with no input tensors");
  }
  bool traced = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      throw Error("compiled module " + state_->module->type_name() + ": input " +
                  std::to_string(i) + " is an undefined Tensor");
    }
    traced = traced || inputs[i].is_traced();
  }
  if (traced) return (*state_->module)(inputs);
  return call(*state_, inputs);
}

namespace {

std::vector<Tensor> call(CompiledModule::State& s, std::span<const Tensor> xs) {
  std::shared_ptr<const Entry> hit;
  bool had_entries = false;
  {
    std::lock_guard lock(s.mu);
    uint64_t gen = runtime::code_cache_generation();
    if (gen != s.generation) {
      s.entries.clear();
      s.retrace_always = false;
      s.generation = gen;
    }
    uint64_t epoch = nn::module_epoch();
    if (epoch != s.epoch) {
      uint64_t fp = capture::module_fingerprint(*s.module);
      if (fp != s.fingerprint) s.entries.clear();
      s.fingerprint = fp;
      s.epoch = epoch;
    }
    had_entries = !s.entries.empty();
    if (!s.retrace_always) hit = s.entries.find(xs);
  }
  if (hit) {
    zc::stats::add(zc::stats::Counter::guard_hits);
    return checked(s, *hit, xs, run_entry(*hit, xs, *s.module));
  }

  // Guard miss: capture. One capture per module at a time; a concurrent caller that waited
  // may find the entry the other one made.
  std::lock_guard capture_lock(s.capture_mu);
  {
    std::lock_guard lock(s.mu);
    if (!s.retrace_always) hit = s.entries.find(xs);
  }
  if (hit) return checked(s, *hit, xs, run_entry(*hit, xs, *s.module));

  Timer ready_timer, capture_timer;
  const Backend& backend = runtime::resolve_backend(s.options.backend, call_device(xs, *s.module));
  // Waited for when this call returns or throws.
  std::future<void> connection = runtime::prefetch_remote(backend);
  auto runner = [&](const ir::Graph& g, std::span<const Tensor> inputs) {
    return run_segment(g, inputs, backend);
  };
  capture::Captured cap = capture::capture_module(*s.module, xs, runner, s.options.fullgraph);
  ir::Graph& graph = cap.graph;
  const std::vector<capture::InputBinding>& bindings = cap.bindings;
  int breaks = cap.breaks;
  double capture_ms = capture_timer.ms();
  zc::stats::add_time(zc::stats::Stage::capture, capture_ms);
  zc::stats::add(zc::stats::Counter::graphs_captured);
  if (breaks) zc::stats::add(zc::stats::Counter::graph_breaks, breaks);
  const bool recapture = had_entries && !s.retrace_always;
  if (recapture) zc::stats::add(zc::stats::Counter::recompiles);
  ZC_LOG(timing) << "capture " << s.module->type_name() << ": " << capture_ms << " ms, "
                 << graph.nodes.size() << " nodes, " << breaks << " graph breaks";

  auto entry = std::make_shared<Entry>();
  for (const Tensor& x : xs) entry->guards.push_back(capture::input_guard(x));
  runtime::GraphVariants::Options variants;
  // A whole trace is compiled hierarchically unless the user asked for one flat graph; graph
  // break segments stay flat (they are re-traced on every call anyway), and an interpreter has
  // nothing to compile once.
  variants.hierarchical =
      s.options.regions == Regions::Auto && !backend.interprets() && breaks == 0;
  variants.replay = s.options.cuda_graphs && breaks == 0;  // a broken trace re-traces
  variants.whole = breaks == 0;
  variants.size_templates = s.options.dynamic != Dynamic::Static;
  variants.products.autotune = s.options.mode == Mode::MaxAutotune;
  variants.products.bf16 = s.options.matmul_precision == MatmulPrecision::Bf16;
  for (size_t i = 0; i < bindings.size(); ++i) {
    entry->bound.push_back(bindings[i].tensor);
    variants.per_call.push_back(bindings[i].kind == ir::InputKind::user);
    if (variants.per_call.back()) entry->user_slots.push_back({i, bindings[i].user});
  }
  ZC_LOG(regions) << s.module->type_name() << ": graph " << hex(ir::graph_hash(graph)).substr(0, 16)
                  << ", " << graph.nodes.size() << " nodes";
  // A dim that became dynamic with this call: code for all its sizes is made now, and this
  // size (like every later one) then finds it in the caches. Templates serve inference graphs;
  // a training call leaves the dim to the next inference call.
  const std::vector<bool> wanted = wanted_gradients(*entry, xs);
  const int64_t compiler_runs = zc::stats::read(zc::stats::Counter::compiler_invocations);
  runtime::GuardMiss miss =
      s.dynamic.on_guard_miss(xs, breaks == 0 && backend.serves_many_sizes() && wanted.empty());
  if (!miss.dynamic.empty()) {
    runtime::compile_for_all_sizes(*s.module, xs, miss.dynamic, graph, backend,
                                   variants.hierarchical);
  }
  entry->code =
      std::make_shared<runtime::GraphVariants>(std::move(graph), backend, std::move(variants));
  // Compiled now, for what this call needs (training or inference), so that "ready" counts it
  // (a recompile's log counts the backward's compiler runs too).
  prepare(*entry, wanted, recapture);
  if (recapture) {
    // The process-wide count: exact unless other modules compile at the same time.
    const int64_t ran = zc::stats::read(zc::stats::Counter::compiler_invocations) - compiler_runs;
    ZC_LOG(recompiles) << s.module->type_name() << ": " << inputs_str(xs)
                       << " matched no compiled graph's guards (" << miss.changed << "): "
                       << (ran == 0 ? "served by the caches and size templates, no compiler run"
                                    : std::to_string(ran) + " compiler run(s)");
  }
  zc::stats::add_time(zc::stats::Stage::ready, ready_timer.ms());
  std::vector<Tensor> out = checked(s, *entry, xs, run_entry(*entry, xs, wanted, *s.module));
  {
    std::lock_guard lock(s.mu);
    if (breaks) {
      s.retrace_always = true;
    } else {
      s.entries.add(std::move(entry));
    }
  }
  return out;
}

}  // namespace

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
  return state_->module;
}
const CompileOptions& CompiledModule::options() const {
  return state_->options;
}

CompiledModule compile(std::shared_ptr<nn::Module> module, CompileOptions options) {
  if (!module) throw Error("compile: the module is null");
  runtime::check_backend(options.backend);
  for (const DynamicDim& d : options.dynamic_dims) {
    if (d.max < std::max<int64_t>(d.min, 2)) {
      throw Error("compile: dynamic_dims for dim " + std::to_string(d.dim) + " has range [" +
                  std::to_string(d.min) + ", " + std::to_string(d.max) +
                  "]; a dynamic dim needs sizes of 2 or more (max >= max(min, 2))");
    }
  }
  auto state = std::make_shared<CompiledModule::State>();
  state->dynamic = runtime::DynamicShapes(options.dynamic, options.dynamic_dims);
  state->module = std::move(module);
  state->options = std::move(options);
  state->options.accuracy_check = runtime::resolve_accuracy_check(state->options.accuracy_check);
  return CompiledModule(std::move(state));
}

}  // namespace zc
