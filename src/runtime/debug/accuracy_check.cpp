#include "runtime/debug/accuracy_check.h"

#include "capture/trace_lock.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <sstream>
#include <string>

#include "runtime/debug/accuracy_bisect.h"
#include "runtime/debug/accuracy_compare.h"
#include "util/env.h"
#include "util/log.h"
#include "util/stats.h"
#include "zc/autograd.h"

namespace zc {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

std::string compiler::AccuracyCulprit::str() const {
  std::ostringstream os;
  if (kernel >= 0) {
    os << "kernel " << kernel << " (" << kernel_kind << ":";
    for (size_t i = 0; i < kernel_ops.size(); ++i) os << (i ? ", " : " ") << kernel_ops[i];
    os << "; zc_k" << kernel << "_" << kernel_kind << ") computing ";
  } else {
    os << "a " << kernel_kind << " ";
  }
  os << "node " << node << " = " << op << " " << shape_str(shape) << " " << dtype_name(dtype);
  if (!region.empty()) os << " in " << region;
  os << ": max abs " << number(max_abs) << ", max rel " << number(max_rel)
     << ", while its inputs match eager";
  return os.str();
}

std::string compiler::AccuracyReport::str() const {
  std::ostringstream os;
  os << module_type << " (input";
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    os << (i ? ", " : " ") << shape_str(input_shapes[i]);
  }
  os << "), call " << call << ": " << (passed ? "passed" : "FAILED");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const AccuracyOutput& o = outputs[i];
    os << "; output " << i << " " << shape_str(o.shape) << " " << dtype_name(o.dtype)
       << (o.passed ? "" : " differs") << ": max abs " << number(o.max_abs) << ", max rel "
       << number(o.max_rel) << " (atol " << number(o.atol) << ", rtol " << number(o.rtol) << ")";
    if (!o.problem.empty()) os << ", " << o.problem;
  }
  if (culprit_found) os << "; first diverging: " << culprit.str();
  if (!note.empty()) os << "; " << note;
  return os.str();
}

namespace runtime {

namespace {

constexpr size_t kKeptReports = 1000;

struct Reports {
  std::mutex mu;
  std::deque<AccuracyReport> list;
};

Reports& reports() {
  static Reports* r = new Reports();  // never destroyed: calls may run during exit
  return *r;
}

void keep(AccuracyReport report) {
  Reports& r = reports();
  std::lock_guard lock(r.mu);
  r.list.push_back(std::move(report));
  if (r.list.size() > kKeptReports) r.list.pop_front();
}

std::vector<Tensor> eager_outputs(nn::Module& module, std::span<const Tensor> xs) {
  // Apart from captures on other threads, which mark the parameters (capture/trace_lock.h).
  capture::EagerScope eager;
  // As capture calls it: the one-tensor forward for one input.
  if (xs.size() == 1) return {module.forward(xs[0])};
  return module.forward(std::vector<Tensor>(xs.begin(), xs.end()));
}

// The graph's input values for this call: the bound values, the call's inputs in their slots
// (a graph with seeds is never compared: check_accuracy returns before).
std::vector<Tensor> graph_inputs(const Specialization& spec, std::span<const Tensor> xs) {
  return call_inputs(spec, xs, {});
}

void find_culprit(const CompileOptions& options, const Specialization& spec,
                  std::span<const Tensor> xs, AccuracyReport& report) {
  if (!options.accuracy_check.bisect) return;
  if (!spec.code->whole()) {
    report.note =
        "the trace broke into segments (a graph break): only whole graphs are searched for "
        "the diverging kernel";
    return;
  }
  report.bisected = true;
  try {
    BisectResult b = bisect_divergence(spec.code->graph(), graph_inputs(spec, xs),
                                       spec.code->backend(), options.accuracy_check,
                                       options.matmul_precision != MatmulPrecision::Highest);
    report.culprit_found = b.found;
    report.culprit = std::move(b.culprit);
    report.note = std::move(b.note);
    ZC_LOG(accuracy) << report.module_type << ": searched in " << b.compiles << " compiles";
  } catch (const Error& e) {
    report.note = std::string("the search for the diverging kernel failed: ") + e.what();
  }
}

}  // namespace

AccuracyCheck resolve_accuracy_check(AccuracyCheck asked) {
  if (asked.calls > 0) return asked;
  const std::optional<std::string> value = env::non_empty(env::Var::accuracy_check);
  if (!value) return asked;
  char* end = nullptr;
  const long long n = std::strtoll(value->c_str(), &end, 10);
  if (*end != '\0' || n < 0) {
    throw Error(std::string("ZC_ACCURACY_CHECK=") + *value +
                ": expected the number of first calls to check per compiled graph (1 or more; "
                "0 or unset: off)");
  }
  asked.calls = n;
  return asked;
}

void check_accuracy(const CompileOptions& options, const Specialization& spec,
                    std::atomic<int64_t>& calls, std::span<const Tensor> xs,
                    std::span<const Tensor> outs, nn::Module& module) {
  const int64_t limit = options.accuracy_check.calls;
  if (calls.load(std::memory_order_relaxed) >= limit) return;
  const int64_t call = calls.fetch_add(1) + 1;
  if (call > limit) return;
  zc::stats::add(zc::stats::Counter::accuracy_checks);
  NoGradGuard no_grad;

  AccuracyReport report;
  report.module_type = module.type_name();
  report.call = call;
  for (const Tensor& x : xs) report.input_shapes.push_back(x.shape());
  if (!spec.seed_slots.empty()) {
    // Eager draws from other seeds: equal outputs cannot be expected (torch compares such
    // graphs only under its fallback_random). Said in the report instead of a false failure.
    report.note =
        "forward() draws random numbers (rand_like, Dropout in training mode): the "
        "compiled and the eager call draw different ones, so they were not compared";
    ZC_LOG(accuracy) << report.str();
    keep(std::move(report));
    return;
  }
  if (!spec.writes.empty()) {
    // An eager run would update the module's buffers a second time (a KV cache's next
    // position written twice, the next call's input changed): not compared, said in the report.
    report.note =
        "forward() updates a buffer in place (index_copy_), which an eager run would update "
        "again: the compiled and eager calls were not compared";
    ZC_LOG(accuracy) << report.str();
    keep(std::move(report));
    return;
  }
  std::vector<Tensor> eager;
  try {
    eager = eager_outputs(module, xs);
  } catch (const Error& e) {
    report.passed = false;
    report.note = std::string("the eager run raised: ") + e.what();
  }
  if (report.passed && eager.size() != outs.size()) {
    report.passed = false;
    report.note = "the compiled call returned " + std::to_string(outs.size()) +
                  " outputs where eager returns " + std::to_string(eager.size());
  }
  if (report.passed) {
    // Bf16 and Tf32 products both round operands: the looser tolerance.
    const bool bf16 = options.matmul_precision != MatmulPrecision::Highest;
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tolerance tol = tolerance_for(options.accuracy_check, eager[i].dtype(), bf16);
      report.outputs.push_back(compare_values(outs[i], eager[i], tol));
      report.passed = report.passed && report.outputs.back().passed;
    }
    if (!report.passed) find_culprit(options, spec, xs, report);
  }
  if (report.passed) {
    ZC_LOG(accuracy) << report.str();
  } else {
    zc::stats::add(zc::stats::Counter::accuracy_failures);
    // Always printed: a wrong result is never a detail to opt into.
    std::fprintf(stderr, "[zc] warning: accuracy check failed: %s\n", report.str().c_str());
  }
  keep(std::move(report));
}

void clear_accuracy_reports() {
  Reports& r = reports();
  std::lock_guard lock(r.mu);
  r.list.clear();
}

std::vector<AccuracyReport> accuracy_reports() {
  Reports& r = reports();
  std::lock_guard lock(r.mu);
  return {r.list.begin(), r.list.end()};
}

}  // namespace runtime

std::vector<compiler::AccuracyReport> compiler::accuracy_reports() {
  return runtime::accuracy_reports();
}

}  // namespace zc
