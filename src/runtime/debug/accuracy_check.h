// The accuracy check of compiled calls (CompileOptions::accuracy_check): the first calls of
// each specialization run the module eagerly too, every output is compared (compare_values),
// and a failure is warned about, with the first diverging kernel when the graph is whole
// (bisect_divergence). The reports of a process are kept for
// zc::compiler::accuracy_reports().
//
// The check never changes what the call returns, and records no gradients: a training call's
// outputs keep their autograd graph. The eager run draws random numbers like any eager call
// (a Dropout in training mode), which the compiled call drew differently: check modules in
// eval mode.
#pragma once

#include <atomic>
#include <span>
#include <vector>

#include "runtime/call/specialization.h"
#include "zc/compile.h"

namespace zc::runtime {

using compiler::AccuracyReport;

// `asked` with the environment applied: ZC_ACCURACY_CHECK=N (a count >= 1) sets calls when
// asked.calls is 0. Raises zc::Error for a value that is not such a count.
AccuracyCheck resolve_accuracy_check(AccuracyCheck asked);

// After a call of `spec` that returned `outs` for inputs `xs`: when `calls` (the count of
// this specialization's checked calls) is below options.accuracy_check.calls, counts the call
// and checks it. Raises nothing a correct compile would not: an eager run that raises is
// reported as a failure.
void check_accuracy(const CompileOptions& options, const Specialization& spec,
                    std::atomic<int64_t>& calls, std::span<const Tensor> xs,
                    std::span<const Tensor> outs, nn::Module& module);

void clear_accuracy_reports();
std::vector<AccuracyReport> accuracy_reports();

}  // namespace zc::runtime
