// What the parts of a compiled module share: the state behind a CompiledModule's handles, and
// the steps of a call. Internal to the runtime; the API is zc/compile.h.
//
//   compiled_module.cpp  the call path: guard check, one run of the executable
//   guard_miss.cpp       a guard miss: capture -> layout -> plan -> prepare
//   async_compile.cpp    CompileOptions::async_compile: the miss compiled on another thread
//   warmup.cpp           CompiledModule::warmup: misses compiled ahead of the calls
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "capture/guards.h"
#include "runtime/call/specialization.h"
#include "runtime/debug/roi.h"
#include "runtime/driver/compile_context.h"
#include "runtime/dynamic/dims.h"
#include "runtime/dynamic/sizes_first.h"
#include "zc/compile.h"

namespace zc {

using Entry = runtime::Specialization;

// What a compiled module's handles and its background compiles share.
struct Core {
  std::shared_ptr<nn::Module> module;
  CompileOptions options;  // options.backend as asked: resolved per input device at capture
  std::shared_ptr<runtime::RoiRecord> roi;
  bool sample_eager = false;  // roi_sampling, roi_guard or ZC_LOGS=roi

  std::mutex mu;  // guards the fields below; never held while running user code or kernels
  runtime::SpecializationTable entries;
  bool retrace_always = false;  // the trace broke: every call traces again
  bool eager_only = false;      // roi_guard measured eager faster
  uint64_t epoch = 0;
  uint64_t fingerprint = 0;
  uint64_t grad_epoch = 0;  // autograd::requires_grad_epoch() when entries were last checked
  uint64_t generation = 0;
  int64_t hits = 0;  // guard hits, numbering the ROI samples
  // async_compile: the inputs being compiled in the background (their compile's context, which
  // a waiting call watches), and those whose compile failed (they run eagerly).
  struct Pending {
    std::vector<capture::InputGuard> guards;
    std::shared_ptr<runtime::CompileContext> ctx;
  };
  std::vector<Pending> pending;
  struct Failed {
    std::vector<capture::InputGuard> guards;
    std::string inputs, error;
  };
  std::vector<Failed> failed;
  int running = 0;  // background compiles not finished
  std::condition_variable idle;

  std::mutex capture_mu;  // one capture and compile at a time per module
  runtime::DynamicShapes dynamic{Dynamic::Auto, {}};  // under capture_mu
  // Sizes first on a thread of its own (runtime/dynamic/sizes_first.h), which the next guard
  // miss waits for and gives `dynamic`. Under capture_mu; the thread counts in `running`.
  std::optional<runtime::SizesFirstBuild> sizes_first_build;
  // Accuracy-checked calls of a trace that broke, whose specializations are never kept.
  std::atomic<int64_t> broken_accuracy_calls{0};

  // A context for a compile of this module: the process cache, named after the module.
  std::shared_ptr<runtime::CompileContext> new_context() const;
};

// A handle's state: its destruction waits for the background compiles, which hold the Core.
struct CompiledModule::State {
  std::shared_ptr<Core> core;
  ~State() {
    std::unique_lock lock(core->mu);
    core->idle.wait(lock, [&] { return core->running == 0; });
  }
};

namespace module_core {

// What a guard miss made: the specialization, kept in the table unless the trace broke (then it
// holds the last segment, for this call alone), what this call wants of it, and what compiling
// it did.
struct Made {
  std::shared_ptr<Entry> entry;
  int breaks = 0;
  std::vector<bool> wanted;
  runtime::CompileReport report;
};

// What besides its inputs decides the graph a call traces: the thread's autocast scope
// (zc/autocast.h); empty outside one. Specializations are found by it (Specialization::tag).
std::string_view call_tag();

// "input [2, 3] f32" or "inputs ...": the call's inputs in a message.
std::string inputs_str(std::span<const Tensor> inputs);
// Which graph inputs want gradients; empty when none does (or grad mode is off).
std::vector<bool> wanted_gradients(const Entry& e, std::span<const Tensor> xs);
// Compiles into `ctx` what a call with these wanted gradients runs, if it is not compiled yet
// (with `whole_step`, the backward too, its report merged).
void prepare(const Entry& e, const std::vector<bool>& wanted, bool whole_step,
             runtime::CompileContext& ctx);
// Captures the module at `xs` and compiles into `ctx` what a call with them needs. The caller
// holds c.capture_mu. `recapture`: the module had compiled graphs (a recompile, counted and
// logged).
Made compile_for(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs, bool whole_step,
                 bool recapture, runtime::CompileContext& ctx);
// Adds what compile_for made to the module's table.
void publish(Core& c, Made& made);
// Under c.mu: forgets the compiled graphs made stale by compiler::reset() or a change of the
// module's structure.
void drop_stale_entries(Core& c);
// Waits for the sizes-first thread, if any, records what it covered and returns what it did
// (an empty report when none ran). The caller holds c.capture_mu.
runtime::CompileReport finish_sizes_first(Core& c);

// The module's forward, as plain code (ROI-timed; `sample`: one of its eager samples).
std::vector<Tensor> run_eager(Core& c, std::span<const Tensor> xs, bool sample);
// A call that hit specialization `e`, the `n`th hit of the module.
std::vector<Tensor> run_hit(Core& c, const Entry& e, std::span<const Tensor> xs, int64_t n);
bool guards_match(const std::vector<capture::InputGuard>& guards, std::span<const Tensor> xs);
// A guard miss under async_compile (async_compile.cpp).
std::vector<Tensor> call_async(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs,
                               bool had_entries);

}  // namespace module_core
}  // namespace zc
