// CompileOptions::async_compile: a guard miss compiles on a thread of its own while the calls
// run the module eagerly. A call waits for the compile only while the caches serve it: until it
// finishes, or until it begins work only a cache miss makes (its context's progress says
// which: runtime/driver/compile_context.h); then it runs eagerly, and later calls switch to
// the compiled code once it is published.
#include <cstdio>
#include <thread>

#include "capture/guards.h"
#include "cpu/threads.h"
#include "runtime/call/module_core.h"
#include "toolchain/build_priority.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"
#include "zc/autocast.h"
#include "zc/autograd.h"

namespace zc::module_core {

namespace {

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

// The background compile of one kind of input.
void compile_in_background(std::shared_ptr<Core> cp, std::vector<Tensor> xs, bool grad_mode,
                           std::optional<DType> autocast, bool recapture,
                           std::shared_ptr<runtime::CompileContext> ctx) {
  Core& c = *cp;
  std::vector<capture::InputGuard> guards;
  for (const Tensor& x : xs) guards.push_back(capture::input_guard(x));
  try {
    GradMode::set_enabled(grad_mode);  // this thread's modes, as the call's
    std::optional<AutocastGuard> cast;
    if (autocast) cast.emplace(*autocast);
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
      made = compile_for(cp, xs, /*whole_step=*/true, recapture, *ctx);
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
                         << " ready in " << t.ms() << " ms: " << made.report.str();
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
    std::erase_if(c.pending, [&](const Core::Pending& p) { return p.ctx == ctx; });
  }
  ctx->progress()->note_finished();
  std::lock_guard lock(c.mu);
  if (--c.running == 0) c.idle.notify_all();
}

}  // namespace

// Starts the compile of these inputs unless one runs; waits for it while the caches serve it;
// else runs the module eagerly.
std::vector<Tensor> call_async(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs,
                               bool had_entries) {
  Core& c = *cp;
  std::shared_ptr<runtime::CompileContext> ctx;
  bool start = false;
  {
    std::lock_guard lock(c.mu);
    for (const Core::Failed& f : c.failed) {
      if (guards_match(f.guards, xs)) return run_eager(c, xs, false);
    }
    for (const Core::Pending& p : c.pending) {
      if (guards_match(p.guards, xs)) ctx = p.ctx;
    }
    if (!ctx) {
      std::vector<capture::InputGuard> guards;
      for (const Tensor& x : xs) guards.push_back(capture::input_guard(x));
      ctx = c.new_context();
      c.pending.push_back({std::move(guards), ctx});
      ++c.running;
      start = true;
    }
  }
  if (start) {
    zc::stats::add(zc::stats::Counter::async_compiles);
    try {
      std::thread(compile_in_background, cp, inputs_for_later(xs), GradMode::is_enabled(),
                  autocast_dtype(), had_entries, ctx)
          .detach();
    } catch (...) {
      std::lock_guard lock(c.mu);
      std::erase_if(c.pending, [&](const Core::Pending& p) { return p.ctx == ctx; });
      if (--c.running == 0) c.idle.notify_all();
      throw;
    }
  }
  const std::shared_ptr<runtime::CompileProgress>& progress = ctx->progress();
  progress->wait_until_finished_or_cold();
  if (progress->finished()) {
    std::shared_ptr<const Entry> hit;
    int64_t n = 0;
    {
      std::lock_guard lock(c.mu);
      if (!c.retrace_always) hit = c.entries.find(xs, call_tag());
      n = ++c.hits;
    }
    if (hit) return run_hit(c, *hit, xs, n);
  }
  return run_eager(c, xs, false);
}

}  // namespace zc::module_core

namespace zc {

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

}  // namespace zc
