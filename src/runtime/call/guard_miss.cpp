// A guard miss of a compiled module, in four steps, each a function of its own:
//   capture  trace the module's forward at the call's inputs into a graph
//   layout   the graph in the layout its backend computes in (runtime/driver/backend_layout.h)
//   plan     what to compile, decided before anything compiles: the specialization's guards
//            and bindings, the variants' options, and what the sizes that vary get
//   prepare  carry the plan out: size templates, then the variants this call needs
// Everything compiles into the context the caller gives, so the miss's report is its own.
#include <future>
#include <optional>

#include "autograd/node.h"
#include "capture/capture.h"
#include "ir/canonical.h"
#include "runtime/call/module_core.h"
#include "runtime/driver/backend_layout.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/driver/graph_variants.h"
#include "runtime/dynamic/training_sizes.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::module_core {

using runtime::Backend;

namespace {

// What the dims of this kind of call get, from the module's dynamic-shape record.
enum class Sizes {
  own,                  // code for the call's own sizes
  all_now,              // dims became dynamic: templates for all their sizes, made first
  first_recorded,       // sizes first, and the record of an earlier process covers them
  first_inline,         // sizes first: templates made on this thread, before the own code
  first_in_background,  // sizes first: traced beside the own build, made on a thread after
};

struct Plan {
  const Backend* backend = nullptr;
  ir::Graph graph;               // captured, in the backend's layout
  std::shared_ptr<Entry> entry;  // guards and bindings; its code is made by prepare
  runtime::GraphVariants::Options variants;
  int breaks = 0;
  std::vector<bool> wanted;  // graph inputs whose gradients the call wants
  runtime::GuardMiss miss;
  Sizes sizes = Sizes::own;
  std::vector<runtime::DynamicRange> recorded;  // Sizes::first_recorded: the dims covered
};

std::vector<Tensor> run_segment(const ir::Graph& g, std::span<const Tensor> inputs,
                                const Backend& backend, runtime::CompileContext& ctx) {
  auto exec = runtime::compile_graph(g, backend, ctx);
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

// Capture and layout: the module traced at `xs` (graph-break segments run as the trace meets
// them), in the backend's layout.
capture::Captured capture_step(Core& c, std::span<const Tensor> xs, const Backend& backend,
                               bool recapture, runtime::CompileContext& ctx) {
  Timer t;
  auto runner = [&](const ir::Graph& g, std::span<const Tensor> inputs) {
    return run_segment(g, inputs, backend, ctx);
  };
  capture::Captured cap = capture::capture_module(*c.module, xs, runner, c.options.fullgraph);
  cap.graph = runtime::in_backend_layout(std::move(cap.graph), backend);
  const double ms = t.ms();
  ctx.add_time(stats::Stage::capture, ms);
  ctx.count(stats::Counter::graphs_captured);
  if (cap.breaks) ctx.count(stats::Counter::graph_breaks, cap.breaks);
  if (recapture) ctx.count(stats::Counter::recompiles);
  ZC_LOG(timing) << "capture " << c.module->type_name() << ": " << ms << " ms, "
                 << cap.graph.nodes.size() << " nodes, " << cap.breaks << " graph breaks";
  return cap;
}

// A tensor forward() made or read that the trace lifted to an input (a mask of more than one
// element, made on the CPU inside a GPU module's forward) is read by the compiled graph on its
// own device, as an embedded constant is (ops/dispatch.cpp: traced calls leave constants to
// the compiled graph): moved there once, here. One that wants gradients cannot be moved (its
// gradient would go to the copy): a zc::Error naming it.
Tensor on_call_device(const capture::InputBinding& b, Device device, const nn::Module& module) {
  const Tensor& t = b.tensor;
  if (b.kind != ir::InputKind::lifted || !t.defined() || t.device() == device) return t;
  if (autograd::requires_grad(t)) {
    throw Error("compiled module " + module.type_name() + ": forward() read a tensor " +
                shape_str(t.shape()) + " on " + t.device().str() +
                " that wants gradients, in a call on " + device.str() + "; move it to " +
                device.str() + " (or register it as a parameter)");
  }
  return t.to(device);
}

// Plan: nothing compiles here. The sizes decision reads the module's dynamic-shape record
// (after the sizes-first thread of an earlier call, which it waits for) and, for sizes first,
// the cache's record of what an earlier process covered.
Plan plan_step(Core& c, std::span<const Tensor> xs, capture::Captured cap, const Backend& backend,
               Device device, runtime::CompileContext& ctx) {
  Plan p;
  p.backend = &backend;
  p.breaks = cap.breaks;
  p.graph = std::move(cap.graph);
  p.entry = std::make_shared<Entry>();
  Entry& e = *p.entry;
  for (const Tensor& x : xs) e.guards.push_back(capture::input_guard(x));
  e.tag = std::string(call_tag());
  e.constants_read = std::move(cap.constants_read);
  e.writes = std::move(cap.writes);
  runtime::GraphVariants::Options& v = p.variants;
  // A whole trace is compiled hierarchically unless the user asked for one flat graph; graph
  // break segments stay flat (they are re-traced on every call anyway), and an interpreter has
  // nothing to compile once.
  v.hierarchical = c.options.regions == Regions::Auto && !backend.interprets() && p.breaks == 0;
  v.replay = c.options.cuda_graphs && p.breaks == 0;  // a broken trace re-traces
  v.whole = p.breaks == 0;
  v.size_templates = c.options.dynamic != Dynamic::Static;
  v.products.autotune = c.options.mode == Mode::MaxAutotune;
  v.products.bf16 = c.options.matmul_precision == MatmulPrecision::Bf16;
  v.products.tf32 = c.options.matmul_precision == MatmulPrecision::Tf32;
  v.activation_memory_budget = c.options.activation_memory_budget;
  for (size_t i = 0; i < cap.bindings.size(); ++i) {
    const ir::InputKind kind = cap.bindings[i].kind;
    e.bound.push_back(on_call_device(cap.bindings[i], device, *c.module));
    v.per_call.push_back(kind == ir::InputKind::user || kind == ir::InputKind::seed);
    if (kind == ir::InputKind::user) e.user_slots.push_back({i, cap.bindings[i].user});
    if (kind == ir::InputKind::seed) e.seed_slots.push_back(i);
  }
  ZC_LOG(regions) << c.module->type_name() << ": graph "
                  << hex(ir::graph_hash(p.graph)).substr(0, 16) << ", " << p.graph.nodes.size()
                  << " nodes";
  p.wanted = wanted_gradients(e, xs);
  if (!e.writes.empty() && !p.wanted.empty()) {
    throw Error("compiled module " + c.module->type_name() +
                ": forward() updates a buffer in place (index_copy_) while gradients are wanted; "
                "compiled training of in-place updates is not supported: call it under "
                "zc::NoGradGuard (decoding), or uncompiled");
  }
  // What the first call's templates cover decides what this one is. A training call makes
  // templates of its forward and backward graphs when a dim becomes dynamic (all_now); sizes
  // first is for inference graphs.
  ctx.merge(finish_sizes_first(c));
  p.miss =
      c.dynamic.on_guard_miss(xs, p.breaks == 0 && backend.serves_many_sizes(), !p.wanted.empty());
  if (!p.miss.dynamic.empty() && !p.miss.expect_served) {
    p.sizes = Sizes::all_now;
  } else if (p.wanted.empty() && !p.miss.sizes_first.empty() && !v.products.autotune &&
             runtime::sizes_first_pays(p.graph, backend)) {
    // Not under max_autotune: its choices are timed per problem, for code of one size.
    if (auto covered = runtime::recorded_sizes_first(c.module->type_name(), p.miss.sizes_first,
                                                     p.graph, backend, v.hierarchical, ctx)) {
      p.sizes = Sizes::first_recorded;
      p.recorded = std::move(*covered);
    } else {
      p.sizes = runtime::sizes_first_in_background(backend) ? Sizes::first_in_background
                                                            : Sizes::first_inline;
    }
  }
  return p;
}

// Sizes first on a thread of its own, counted among the module's background compiles. The
// caller holds c.capture_mu.
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
                                std::lock_guard lock(cp->mu);
                                if (--cp->running == 0) cp->idle.notify_all();
                              });
}

// Prepare: a dim that became dynamic with this call gets code for all its sizes first, and
// this size (like every later one) then finds it in the caches; then the variants this call
// needs compile, so that "ready" counts them.
Made prepare_step(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs, Plan p,
                  bool whole_step, runtime::CompileContext& ctx) {
  Core& c = *cp;
  const Backend& backend = *p.backend;
  const bool hierarchical = p.variants.hierarchical;
  // Sizes first in the background: the samples are traced on another thread while this call's
  // own code is built (which reads no parameter: they are bound when it runs), and the
  // templates are begun once that build is done, so that their lowering does not slow it down.
  // (The graph is declared first: should the build throw, the future's destructor waits for
  // the trace, which reads it.)
  ir::Graph background_graph;
  std::future<std::optional<runtime::SizeSamples>> background_samples;
  switch (p.sizes) {
    case Sizes::own:
      break;
    case Sizes::all_now:
      if (p.wanted.empty()) {
        runtime::compile_for_all_sizes(*c.module, xs, p.miss.dynamic, p.graph, backend,
                                       hierarchical, ctx);
      } else {
        std::vector<size_t> wrt;
        for (size_t i = 0; i < p.wanted.size(); ++i) {
          if (p.wanted[i]) wrt.push_back(i);
        }
        runtime::compile_training_for_all_sizes(*c.module, xs, p.miss.dynamic, p.graph, wrt,
                                                backend, hierarchical,
                                                c.options.activation_memory_budget, ctx);
      }
      break;
    case Sizes::first_recorded:
      c.dynamic.made_sizes_first(xs, p.recorded);
      break;
    case Sizes::first_inline:
      if (std::optional<runtime::SizeSamples> samples =
              runtime::trace_sizes_first(*c.module, xs, p.miss.sizes_first, p.graph, backend)) {
        c.dynamic.made_sizes_first(xs, runtime::build_sizes_first(std::move(*samples), p.graph,
                                                                  backend, hierarchical, ctx));
      }
      break;
    case Sizes::first_in_background:
      background_graph = p.graph;
      background_samples = runtime::trace_sizes_first_beside(*c.module, xs, p.miss.sizes_first,
                                                             background_graph, backend);
      break;
  }
  Made made;
  made.breaks = p.breaks;
  made.wanted = std::move(p.wanted);
  made.entry = std::move(p.entry);
  made.entry->code =
      std::make_shared<runtime::GraphVariants>(std::move(p.graph), backend, std::move(p.variants));
  prepare(*made.entry, made.wanted, whole_step, ctx);
  if (background_samples.valid()) {
    // Before the call runs its code: a trace marks the parameters that code reads.
    if (std::optional<runtime::SizeSamples> samples = background_samples.get()) {
      // The traces are done: their graph goes to the build.
      start_sizes_first(cp, xs, std::move(*samples), std::move(background_graph), backend,
                        hierarchical);
    }
  }
  return made;
}

}  // namespace

runtime::CompileReport finish_sizes_first(Core& c) {
  if (!c.sizes_first_build) return {};
  runtime::SizesFirstBuild build = std::move(*c.sizes_first_build);
  c.sizes_first_build.reset();
  c.dynamic.made_sizes_first(build.inputs(), build.covered());
  return build.report();
}

Made compile_for(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs, bool whole_step,
                 bool recapture, runtime::CompileContext& ctx) {
  Core& c = *cp;
  Timer ready;
  const Device device = call_device(xs, *c.module);
  const Backend& backend = runtime::resolve_backend(c.options.backend, device);
  // Waited for when this returns or throws.
  std::future<void> connection = runtime::prefetch_remote(backend, ctx);
  capture::Captured cap = capture_step(c, xs, backend, recapture, ctx);
  Plan plan = plan_step(c, xs, std::move(cap), backend, device, ctx);
  const runtime::GuardMiss miss = plan.miss;
  const bool training = !plan.wanted.empty();
  Made made = prepare_step(cp, xs, std::move(plan), whole_step, ctx);
  made.report = ctx.report();
  if (miss.expect_served && made.report.count(stats::Counter::template_refusals) > 0) {
    ZC_LOG(recompiles) << c.module->type_name() << ": " << inputs_str(xs)
                       << " is not served by the size templates made before";
    c.dynamic.templates_missed(xs, training);
  }
  if (recapture) {
    const int64_t ran = made.report.compiler_runs();
    ZC_LOG(recompiles) << c.module->type_name() << ": " << inputs_str(xs)
                       << " matched no compiled graph's guards (" << miss.changed << "): "
                       << (ran == 0 ? "served by the caches and size templates, no compiler run"
                                    : std::to_string(ran) + " compiler run(s)");
  }
  const double ready_ms = ready.ms();
  ctx.add_time(stats::Stage::ready, ready_ms);
  made.report.ms[static_cast<size_t>(stats::Stage::ready)] += ready_ms;
  c.roi->add_compile(ready_ms);
  return made;
}

// A trace that broke makes every later call trace again.
void publish(Core& c, Made& made) {
  std::lock_guard lock(c.mu);
  if (made.breaks) {
    c.retrace_always = true;
  } else {
    c.entries.add(made.entry);
  }
}

}  // namespace zc::module_core
