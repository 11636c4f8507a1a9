// CompiledModule::warmup: compiles what given calls need before the first real one (their
// backward too where they want gradients), and reports what each call found: compiled, served
// by a size template, from the caches, or compiled already.
#include <cstdio>

#include "runtime/call/module_core.h"
#include "util/timer.h"

namespace zc {

namespace {

using namespace module_core;

WarmupReport::Item warmup_one(const std::shared_ptr<Core>& cp, std::span<const Tensor> xs) {
  Core& c = *cp;
  WarmupReport::Item item;
  item.inputs = inputs_str(xs);
  Timer t;
  std::shared_ptr<runtime::CompileContext> ctx = c.new_context();
  std::shared_ptr<const Entry> hit;
  bool had_entries = false, broke = false;
  {
    std::lock_guard capture_lock(c.capture_mu);
    {
      std::lock_guard lock(c.mu);
      drop_stale_entries(c);
      had_entries = !c.entries.empty();
      if (!c.retrace_always) hit = c.entries.find(xs, call_tag());
    }
    if (hit) {
      std::vector<bool> wanted = wanted_gradients(*hit, xs);
      prepare(*hit, wanted, /*whole_step=*/true, *ctx);
      item.training = !wanted.empty() && hit->code->whole();
    } else {
      Made made = compile_for(cp, xs, /*whole_step=*/true, had_entries && !c.retrace_always, *ctx);
      publish(c, made);
      broke = made.breaks > 0;
      item.training = !made.wanted.empty() && !broke;
    }
  }
  item.ms = t.ms();
  // This call's own report: exact while other modules compile at the same time.
  const runtime::CompileReport report = ctx->report();
  item.compiler_runs = report.compiler_runs();
  if (broke) {
    item.result = "traced on every call (graph break)";
  } else if (item.compiler_runs > 0) {
    item.result = "compiled (" + std::to_string(item.compiler_runs) + " compiler runs)";
  } else if (report.count(stats::Counter::template_hits) > 0) {
    item.result = "served by a size template";
  } else if (hit) {
    item.result = "already compiled";
  } else {
    item.result = "from the caches";
  }
  return item;
}

WarmupReport warmup_calls(const std::shared_ptr<Core>& cp,
                          const std::vector<std::vector<Tensor>>& calls) {
  Core& c = *cp;
  Timer t;
  WarmupReport report;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::vector<Tensor>& xs = calls[i];
    if (xs.empty()) {
      throw Error("warmup of " + c.module->type_name() + ": call " + std::to_string(i) +
                  " has no input tensors");
    }
    for (size_t j = 0; j < xs.size(); ++j) {
      if (!xs[j].defined() || xs[j].is_traced()) {
        throw Error("warmup of " + c.module->type_name() + ": call " + std::to_string(i) +
                    " input " + std::to_string(j) +
                    (xs[j].defined() ? " is a traced tensor" : " is an undefined Tensor") +
                    "; warm up with the concrete inputs of a real call");
      }
    }
    report.items.push_back(warmup_one(cp, xs));
    report.compiler_runs += report.items.back().compiler_runs;
  }
  {
    // A warm-up leaves no compile behind: the templates a first call began on their own thread
    // are made before it returns, counted in its last item.
    std::lock_guard capture_lock(c.capture_mu);
    const int64_t more = finish_sizes_first(c).compiler_runs();
    if (!report.items.empty()) report.items.back().compiler_runs += more;
    report.compiler_runs += more;
  }
  report.ms = t.ms();
  return report;
}

}  // namespace

std::string WarmupReport::str() const {
  std::string s;
  char buf[64];
  for (const Item& i : items) {
    std::snprintf(buf, sizeof buf, "%.1f ms", i.ms);
    s += i.inputs + ": " + i.result + (i.training ? ", with its backward" : "") + ", " + buf + "\n";
  }
  std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  return s + "warm-up: " + std::to_string(items.size()) + " calls, " +
         std::to_string(compiler_runs) + " compiler runs, " + buf + "\n";
}

std::string WarmupReport::json() const {
  std::string s = "{\"ms\":" + std::to_string(ms) +
                  ",\"compiler_runs\":" + std::to_string(compiler_runs) + ",\"items\":[";
  for (size_t k = 0; k < items.size(); ++k) {
    const Item& i = items[k];
    s += std::string(k ? "," : "") + "{\"inputs\":\"" + i.inputs + "\",\"result\":\"" + i.result +
         "\",\"training\":" + (i.training ? "true" : "false") +
         ",\"compiler_runs\":" + std::to_string(i.compiler_runs) +
         ",\"ms\":" + std::to_string(i.ms) + "}";
  }
  return s + "]}";
}

WarmupReport CompiledModule::warmup(const std::vector<std::vector<Tensor>>& calls) const {
  return warmup_calls(state_->core, calls);
}

WarmupReport CompiledModule::warmup(const std::vector<Tensor>& one_tensor_calls) const {
  std::vector<std::vector<Tensor>> calls;
  for (const Tensor& x : one_tensor_calls) calls.push_back({x});
  return warmup_calls(state_->core, calls);
}

}  // namespace zc
