// The call path of a compiled module: guard check, then one run of the executable; on a guard
// miss, capture and compile first.
#include <future>
#include <mutex>

#include "autograd/record.h"
#include "capture/capture.h"
#include "capture/guards.h"
#include "ir/canonical.h"
#include "nn/epoch.h"
#include "runtime/code_cache.h"
#include "runtime/compile_graph.h"
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
};

namespace {

std::vector<Tensor> run_entry(const Entry& e, const Tensor& x) {
  std::vector<const Tensor*> args(e.bound.size());
  for (size_t i = 0; i < e.bound.size(); ++i) args[i] = &e.bound[i];
  for (size_t s : e.user_slots) args[s] = &x;
  return e.exec->run(args);
}

// When autograd wants gradients of the call's inputs or parameters, the output gets the node
// that runs the specialization's compiled backward. A trace that broke has no whole graph to
// differentiate: its output refuses gradients with an error naming the module, rather than
// silently leaving the parameters without them.
Tensor with_gradients(Tensor out, const Entry& e, const Tensor& x, const nn::Module& module) {
  if (e.backward) {
    if (!autograd::wants_grad(e.bound) && !autograd::wants_grad({&x, 1})) return out;
    std::vector<Tensor> inputs = e.bound;
    for (size_t slot : e.user_slots) inputs[slot] = x;
    return runtime::record_compiled_backward(std::move(out), std::move(inputs), e.backward,
                                             module.type_name());
  }
  // The last segment's inputs are mostly values of earlier segments: whether gradients are
  // wanted is asked of the module's parameters and the input.
  std::vector<Tensor> sources = module.parameters();
  sources.push_back(x);
  if (!autograd::wants_grad(sources)) return out;
  std::vector<Tensor> outs{std::move(out)};
  autograd::record_opaque("compiled module " + module.type_name(),
                          "broke its trace into segments (a graph break), and gradients flow "
                          "only through a whole graph; call the module uncompiled to train it, "
                          "or remove the graph break (ZC_LOGS=graph shows where it is)",
                          sources, outs);
  return outs[0];
}

std::vector<Tensor> run_segment(const ir::Graph& g, std::span<const Tensor> inputs,
                                const Backend& backend) {
  auto exec = runtime::compile_graph(g, backend);
  std::vector<const Tensor*> args;
  for (const Tensor& t : inputs) args.push_back(&t);
  return exec->run(args);
}

}  // namespace

Tensor CompiledModule::operator()(const Tensor& x) const {
  State& s = *state_;
  if (!x.defined()) throw Error("compiled module: called with an undefined Tensor");
  // Inside another capture, a compiled module is traced through like any module call.
  if (x.is_traced()) return (*s.module)(x);

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
    if (!s.retrace_always) hit = s.entries.find(x);
  }
  if (hit) {
    zc::stats::add(zc::stats::Counter::guard_hits);
    return with_gradients(run_entry(*hit, x)[0], *hit, x, *s.module);
  }

  // Guard miss: capture. One capture per module at a time; a concurrent caller that waited
  // may find the entry the other one made.
  std::lock_guard capture_lock(s.capture_mu);
  {
    std::lock_guard lock(s.mu);
    if (!s.retrace_always) hit = s.entries.find(x);
  }
  if (hit) return with_gradients(run_entry(*hit, x)[0], *hit, x, *s.module);

  Timer ready_timer, capture_timer;
  const Backend& backend = runtime::resolve_backend(s.options.backend, x.device());
  // Waited for when this call returns or throws.
  std::future<void> connection = runtime::prefetch_remote(backend);
  auto runner = [&](const ir::Graph& g, std::span<const Tensor> inputs) {
    return run_segment(g, inputs, backend);
  };
  capture::Captured cap = capture::capture_module(*s.module, x, runner, s.options.fullgraph);
  ir::Graph& graph = cap.graph;
  const std::vector<capture::InputBinding>& bindings = cap.bindings;
  int breaks = cap.breaks;
  double capture_ms = capture_timer.ms();
  zc::stats::add_time(zc::stats::Stage::capture, capture_ms);
  zc::stats::add(zc::stats::Counter::graphs_captured);
  if (breaks) zc::stats::add(zc::stats::Counter::graph_breaks, breaks);
  if (had_entries && !s.retrace_always) {
    zc::stats::add(zc::stats::Counter::recompiles);
    ZC_LOG(recompiles) << s.module->type_name() << ": recompiling for input "
                       << shape_str(x.shape()) << " " << dtype_name(x.dtype())
                       << (x.is_contiguous() ? "" : " (non-contiguous)")
                       << ": no compiled graph matches its guards";
  }
  ZC_LOG(timing) << "capture " << s.module->type_name() << ": " << capture_ms << " ms, "
                 << graph.nodes.size() << " nodes, " << breaks << " graph breaks";

  auto entry = std::make_shared<Entry>();
  entry->guard = capture::input_guard(x);
  // A whole trace is compiled hierarchically unless the user asked for one flat graph; graph
  // break segments stay flat (they are re-traced on every call anyway), and an interpreter has
  // nothing to compile once.
  const bool hierarchical =
      s.options.regions == Regions::Auto && !backend.interprets() && breaks == 0;
  entry->exec = hierarchical ? runtime::compile_hierarchical(graph, backend)
                             : runtime::compile_graph(graph, backend);
  std::vector<bool> per_call;
  for (size_t i = 0; i < bindings.size(); ++i) {
    entry->bound.push_back(bindings[i].tensor);
    per_call.push_back(bindings[i].kind == ir::InputKind::user);
    if (per_call.back()) entry->user_slots.push_back(i);
  }
  // A whole trace only: a broken one is traced again on every call.
  if (s.options.cuda_graphs && breaks == 0) {
    entry->exec = backend.replayable(std::move(entry->exec), std::move(per_call));
  }
  ZC_LOG(regions) << s.module->type_name() << ": graph " << hex(ir::graph_hash(graph)).substr(0, 16)
                  << ", " << graph.nodes.size() << " nodes";
  if (breaks == 0) {
    // The graph's last use here: its backward is derived from it if a backward() needs one,
    // and compiled the way the forward was.
    entry->backward =
        std::make_shared<runtime::BackwardPlans>(std::move(graph), backend, hierarchical);
  }
  zc::stats::add_time(zc::stats::Stage::ready, ready_timer.ms());
  Tensor out = with_gradients(run_entry(*entry, x)[0], *entry, x, *s.module);
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

namespace {
class CompiledBlock final : public nn::Module {
 public:
  CompiledBlock(std::shared_ptr<nn::Module> inner, CompileOptions options)
      : inner_(register_module("module", std::move(inner))), fast_(compile(inner_, options)) {}
  Tensor forward(const Tensor& x) override { return fast_(x); }
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
  auto state = std::make_shared<CompiledModule::State>();
  state->module = std::move(module);
  state->options = std::move(options);
  return CompiledModule(std::move(state));
}

}  // namespace zc
