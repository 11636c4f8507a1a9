// The call path of a compiled module: guard check, then one run of the executable; on a guard
// miss, capture and compile first. The steps a warm-up shares with it (warmup.cpp) are declared
// in module_core.h.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/record.h"
#include "capture/capture.h"
#include "capture/guards.h"
#include "capture/trace_lock.h"
#include "cpu/threads.h"
#include "ir/canonical.h"
#include "nn/epoch.h"
#include "runtime/call/module_core.h"
#include "runtime/call/specialization.h"
#include "runtime/debug/accuracy_check.h"
#include "runtime/debug/roi.h"
#include "runtime/driver/backend_layout.h"
#include "runtime/driver/code_cache.h"
#include "runtime/driver/compile_events.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/dynamic/dims.h"
#include "runtime/dynamic/sizes_first.h"
#include "runtime/regions/compile.h"
#include "toolchain/build_priority.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"
#include "zc/autograd.h"
#include "zc/compile.h"

namespace zc {

using runtime::Backend;

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

// The call's graph inputs: the bound values, with the call's inputs in the user slots (and
// seeds of the graph's rand_likes drawn anew; they want no gradients).
std::vector<Tensor> entry_inputs(const Entry& e, std::span<const Tensor> xs) {
  return runtime::call_inputs(e, xs, runtime::draw_seeds(e));
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
  const std::vector<Tensor> seeds = runtime::draw_seeds(e);
  for (size_t k = 0; k < seeds.size(); ++k) args[e.seed_slots[k]] = &seeds[k];
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
std::vector<Tensor> call(const std::shared_ptr<Core>& c, std::span<const Tensor> xs);

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

namespace module_core {

bool guards_match(const std::vector<capture::InputGuard>& guards, std::span<const Tensor> xs) {
  if (guards.size() != xs.size()) return false;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!capture::guard_matches(guards[i], capture::input_guard_hash(xs[i]), xs[i])) return false;
  }
  return true;
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

// The module's forward, as plain code: no capture may mark its parameters meanwhile.
std::vector<Tensor> run_eager(Core& c, std::span<const Tensor> xs, bool sample) {
  zc::stats::add(zc::stats::Counter::eager_calls);
  Timer t;
  std::vector<Tensor> out;
  {
    capture::EagerScope eager;
    out = (*c.module)(std::vector<Tensor>(xs.begin(), xs.end()));
  }
  c.roi->add_eager_call(t.ms(), sample);
  return out;
}

// A call that hit a compiled specialization: runs it, timed for the ROI report, or runs the
// module eagerly when this is one of its ROI samples (and then, under roi_guard, may find the
// compiled code not worth it).
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
  std::vector<Tensor> out = run_entry(e, xs, *c.module);
  c.roi->add_compiled_call(t.ms());
  return checked(c, e, xs, std::move(out));
}

// Sizes first with its templates made on a thread of their own, counted among the module's
// background compiles. The caller holds c.capture_mu.
void start_sizes_first(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs,
                       runtime::SizeSamples samples, ir::Graph graph, const Backend& backend,
                       bool hierarchical) {
  Core& c = *cp;
  {
    std::lock_guard lock(c.mu);
    ++c.running;
  }
  c.sizes_first_build.emplace(c.module->type_name(), xs, std::move(samples), std::move(graph),
                              backend, hierarchical, [cp] {
                                runtime::note_compile_finished();
                                std::lock_guard lock(cp->mu);
                                if (--cp->running == 0) cp->idle.notify_all();
                              });
}

// Waits for the sizes-first thread, if one runs or ran unseen, and records what it covered.
// The caller holds c.capture_mu.
void finish_sizes_first(Core& c) {
  if (!c.sizes_first_build) return;
  runtime::SizesFirstBuild build = std::move(*c.sizes_first_build);
  c.sizes_first_build.reset();
  c.dynamic.made_sizes_first(build.inputs(), build.covered());
}

// Captures the module at `xs` and compiles what a call with them needs (the backward too when
// `whole_step`). The caller holds c.capture_mu. `recapture`: the module had compiled graphs
// (a recompile, counted and logged).
Made compile_for(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs, bool whole_step,
                 bool recapture) {
  Core& c = *cp;
  Timer ready_timer, capture_timer;
  const Backend& backend = runtime::resolve_backend(c.options.backend, call_device(xs, *c.module));
  // Waited for when this returns or throws.
  std::future<void> connection = runtime::prefetch_remote(backend);
  auto runner = [&](const ir::Graph& g, std::span<const Tensor> inputs) {
    return run_segment(g, inputs, backend);
  };
  capture::Captured cap = capture::capture_module(*c.module, xs, runner, c.options.fullgraph);
  cap.graph = runtime::in_backend_layout(std::move(cap.graph), backend);
  ir::Graph& graph = cap.graph;
  const std::vector<capture::InputBinding>& bindings = cap.bindings;
  Made made;
  made.breaks = cap.breaks;
  const int breaks = cap.breaks;
  double capture_ms = capture_timer.ms();
  zc::stats::add_time(zc::stats::Stage::capture, capture_ms);
  zc::stats::add(zc::stats::Counter::graphs_captured);
  if (breaks) zc::stats::add(zc::stats::Counter::graph_breaks, breaks);
  if (recapture) zc::stats::add(zc::stats::Counter::recompiles);
  ZC_LOG(timing) << "capture " << c.module->type_name() << ": " << capture_ms << " ms, "
                 << graph.nodes.size() << " nodes, " << breaks << " graph breaks";

  auto entry = std::make_shared<Entry>();
  for (const Tensor& x : xs) entry->guards.push_back(capture::input_guard(x));
  entry->constants_read = std::move(cap.constants_read);
  runtime::GraphVariants::Options variants;
  // A whole trace is compiled hierarchically unless the user asked for one flat graph; graph
  // break segments stay flat (they are re-traced on every call anyway), and an interpreter has
  // nothing to compile once.
  variants.hierarchical =
      c.options.regions == Regions::Auto && !backend.interprets() && breaks == 0;
  variants.replay = c.options.cuda_graphs && breaks == 0;  // a broken trace re-traces
  variants.whole = breaks == 0;
  variants.size_templates = c.options.dynamic != Dynamic::Static;
  variants.products.autotune = c.options.mode == Mode::MaxAutotune;
  variants.products.bf16 = c.options.matmul_precision == MatmulPrecision::Bf16;
  variants.products.tf32 = c.options.matmul_precision == MatmulPrecision::Tf32;
  for (size_t i = 0; i < bindings.size(); ++i) {
    entry->bound.push_back(bindings[i].tensor);
    const ir::InputKind kind = bindings[i].kind;
    variants.per_call.push_back(kind == ir::InputKind::user || kind == ir::InputKind::seed);
    if (kind == ir::InputKind::user) entry->user_slots.push_back({i, bindings[i].user});
    if (kind == ir::InputKind::seed) entry->seed_slots.push_back(i);
  }
  ZC_LOG(regions) << c.module->type_name() << ": graph " << hex(ir::graph_hash(graph)).substr(0, 16)
                  << ", " << graph.nodes.size() << " nodes";
  // A dim that became dynamic with this call: code for all its sizes is made now, and this
  // size (like every later one) then finds it in the caches. Templates serve inference graphs;
  // a training call leaves the dim to the next inference call.
  made.wanted = wanted_gradients(*entry, xs);
  const int64_t compiler_runs = zc::stats::read(zc::stats::Counter::compiler_invocations);
  const int64_t refusals = zc::stats::read(zc::stats::Counter::template_refusals);
  finish_sizes_first(c);  // what the first call's templates cover decides what this one is
  // Sizes first on a thread of its own: its samples are traced on another thread while this
  // call's own code is built (which reads no parameter: they are bound when it runs), and the
  // templates are begun once that build is done, so that their lowering does not slow it down.
  // (The graph is declared first: should the build throw, the future's destructor waits for
  // the trace, which reads it.)
  ir::Graph background_graph;
  std::future<std::optional<runtime::SizeSamples>> background_samples;
  runtime::GuardMiss miss = c.dynamic.on_guard_miss(
      xs, breaks == 0 && backend.serves_many_sizes() && made.wanted.empty());
  if (!miss.dynamic.empty() && !miss.expect_served) {
    runtime::compile_for_all_sizes(*c.module, xs, miss.dynamic, graph, backend,
                                   variants.hierarchical);
  } else if (!miss.sizes_first.empty() && !variants.products.autotune &&
             runtime::sizes_first_pays(graph, backend)) {
    // Not under max_autotune: its choices are timed per problem, for code of one size.
    if (auto covered = runtime::recorded_sizes_first(c.module->type_name(), miss.sizes_first, graph,
                                                     backend, variants.hierarchical)) {
      c.dynamic.made_sizes_first(xs, *covered);
    } else if (runtime::sizes_first_in_background(backend)) {
      background_graph = graph;
      background_samples = runtime::trace_sizes_first_beside(*c.module, xs, miss.sizes_first,
                                                             background_graph, backend);
    } else if (std::optional<runtime::SizeSamples> samples =
                   runtime::trace_sizes_first(*c.module, xs, miss.sizes_first, graph, backend)) {
      c.dynamic.made_sizes_first(xs, runtime::build_sizes_first(std::move(*samples), graph, backend,
                                                                variants.hierarchical));
    }
  }
  const bool hierarchical = variants.hierarchical;
  entry->code =
      std::make_shared<runtime::GraphVariants>(std::move(graph), backend, std::move(variants));
  // Compiled now, for what this call needs (training or inference), so that "ready" counts it
  // (a recompile's log counts the backward's compiler runs too).
  prepare(*entry, made.wanted, whole_step);
  const int64_t ran = zc::stats::read(zc::stats::Counter::compiler_invocations) - compiler_runs;
  if (background_samples.valid()) {
    // Before the call runs its code: a trace marks the parameters that code reads.
    if (std::optional<runtime::SizeSamples> samples = background_samples.get()) {
      // The traces are done: their graph goes to the build.
      start_sizes_first(cp, xs, std::move(*samples), std::move(background_graph), backend,
                        hierarchical);
    }
  }
  if (miss.expect_served && zc::stats::read(zc::stats::Counter::template_refusals) > refusals) {
    ZC_LOG(recompiles) << c.module->type_name() << ": " << inputs_str(xs)
                       << " is not served by the size templates made before";
    c.dynamic.templates_missed(xs);
  }
  if (recapture) {
    // The process-wide count: exact unless other modules compile at the same time.
    ZC_LOG(recompiles) << c.module->type_name() << ": " << inputs_str(xs)
                       << " matched no compiled graph's guards (" << miss.changed << "): "
                       << (ran == 0 ? "served by the caches and size templates, no compiler run"
                                    : std::to_string(ran) + " compiler run(s)");
  }
  const double ready_ms = ready_timer.ms();
  zc::stats::add_time(zc::stats::Stage::ready, ready_ms);
  c.roi->add_compile(ready_ms);
  made.entry = std::move(entry);
  return made;
}

// Adds what compile_for made; a trace that broke makes every later call trace again.
void publish(Core& c, Made& made) {
  std::lock_guard lock(c.mu);
  if (made.breaks) {
    c.retrace_always = true;
  } else {
    c.entries.add(made.entry);
  }
}

// Copies of the call's inputs for a compile on another thread, which may outlive the call and
// must not see the caller reuse their memory; they keep requires_grad, which decides what is
// compiled.
std::vector<Tensor> inputs_for_later(std::span<const Tensor> xs) {
  std::vector<Tensor> out;
  NoGradGuard no_grad;
  for (const Tensor& x : xs) {
    Tensor copy = x.detach().clone();
    if (x.requires_grad()) copy.requires_grad_(true);
    out.push_back(std::move(copy));
  }
  return out;
}

// The background compile of one kind of input (async_compile).
void compile_in_background(std::shared_ptr<Core> cp, std::vector<Tensor> xs, bool grad_mode,
                           bool recapture, std::shared_ptr<std::atomic<bool>> done) {
  Core& c = *cp;
  std::vector<capture::InputGuard> guards;
  for (const Tensor& x : xs) guards.push_back(capture::input_guard(x));
  try {
    GradMode::set_enabled(grad_mode);  // this thread's mode, as the call's
    // Counted as a call in flight, so that the eager calls meanwhile take a share of the CPU's
    // threads and leave cores to the compiler: a full OpenMP team beside compiler processes
    // oversubscribes the machine, and an eager gpt-small call then took 4-7x its time.
    cpu::CpuCallShare share;
    toolchain::BackgroundBuildScope niced;  // and the compiler yields the CPU to them
    Timer t;
    Made made;
    uint64_t traced_fingerprint = 0;
    {
      std::lock_guard capture_lock(c.capture_mu);
      traced_fingerprint = capture::module_fingerprint(*c.module);
      made = compile_for(cp, xs, /*whole_step=*/true, recapture);
    }
    // The module may have changed while this compiled (a parameter replaced, train/eval), after
    // a call already saw the change and dropped the older entries: code traced from the old
    // module must not be published then, or the next calls would run it.
    if (capture::module_fingerprint(*c.module) != traced_fingerprint) {
      ZC_LOG(recompiles) << c.module->type_name() << ": background compile for " << inputs_str(xs)
                         << " dropped: the module changed while it compiled";
    } else {
      publish(c, made);
      ZC_LOG(recompiles) << c.module->type_name() << ": background compile for " << inputs_str(xs)
                         << " ready in " << t.ms() << " ms";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "[zc] warning: the background compile of %s for %s failed; calls with those "
                 "inputs run eagerly: %s\n",
                 c.module->type_name().c_str(), inputs_str(xs).c_str(), e.what());
    std::lock_guard lock(c.mu);
    c.failed.push_back({guards, inputs_str(xs), e.what()});
  }
  {
    std::lock_guard lock(c.mu);
    std::erase_if(c.pending, [&](const Core::Pending& p) { return p.done == done; });
  }
  done->store(true);
  runtime::note_compile_finished();
  std::lock_guard lock(c.mu);
  if (--c.running == 0) c.idle.notify_all();
}

// A guard miss under async_compile: starts the compile of these inputs unless one runs; waits
// for it while the caches serve it; else runs the module eagerly.
std::vector<Tensor> call_async(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs,
                               bool had_entries) {
  Core& c = *cp;
  std::shared_ptr<std::atomic<bool>> done;
  uint64_t cold_before = 0;
  bool start = false;
  {
    std::lock_guard lock(c.mu);
    for (const Core::Failed& f : c.failed) {
      if (guards_match(f.guards, xs)) return run_eager(c, xs, false);
    }
    for (const Core::Pending& p : c.pending) {
      if (guards_match(p.guards, xs)) {
        done = p.done;
        cold_before = p.cold_before;
      }
    }
    if (!done) {
      std::vector<capture::InputGuard> guards;
      for (const Tensor& x : xs) guards.push_back(capture::input_guard(x));
      done = std::make_shared<std::atomic<bool>>(false);
      cold_before = runtime::cold_work_count();
      c.pending.push_back({std::move(guards), done, cold_before});
      ++c.running;
      start = true;
    }
  }
  if (start) {
    zc::stats::add(zc::stats::Counter::async_compiles);
    try {
      std::thread(compile_in_background, cp, inputs_for_later(xs), GradMode::is_enabled(),
                  had_entries, done)
          .detach();
    } catch (...) {
      std::lock_guard lock(c.mu);
      std::erase_if(c.pending, [&](const Core::Pending& p) { return p.done == done; });
      if (--c.running == 0) c.idle.notify_all();
      throw;
    }
  }
  runtime::wait_until_done_or_cold(cold_before, [&] { return done->load(); });
  if (done->load()) {
    std::shared_ptr<const Entry> hit;
    int64_t n = 0;
    {
      std::lock_guard lock(c.mu);
      if (!c.retrace_always) hit = c.entries.find(xs);
      n = ++c.hits;
    }
    if (hit) return run_hit(c, *hit, xs, n);
  }
  return run_eager(c, xs, false);
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
    if (!c.retrace_always && !eager_only) hit = c.entries.find(xs);
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
    if (!c.retrace_always) hit = c.entries.find(xs);
  }
  if (hit) {
    capture_lock.unlock();
    return checked(c, *hit, xs, run_entry(*hit, xs, *c.module));
  }
  const bool recapture = had_entries && !c.retrace_always;
  Made made = compile_for(cp, xs, /*whole_step=*/recapture, recapture);
  std::vector<Tensor> out =
      checked(c, *made.entry, xs, run_entry(*made.entry, xs, made.wanted, *c.module));
  publish(c, made);
  return out;
}

}  // namespace module_core

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

void CompiledModule::wait_for_compiles() const {
  Core& c = *state_->core;
  std::unique_lock lock(c.mu);
  c.idle.wait(lock, [&] { return c.running == 0; });
  if (c.failed.empty()) return;
  std::string what = "compiled module " + c.module->type_name() + ": " +
                     std::to_string(c.failed.size()) +
                     " background compile(s) failed; their calls run eagerly:";
  for (const Core::Failed& f : c.failed) what += "\n  " + f.inputs + ": " + f.error;
  throw Error(what);
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
