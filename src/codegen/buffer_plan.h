// plan_buffers(): where every materialized value lives.
//
// Input: a schedule. Output: inputs, constants and graph outputs keep their own buffers; every
// other stored value gets a 64-byte aligned range of one arena, reused by values whose
// lifetimes (from the kernel that writes them to the last kernel that reads them) do not
// overlap. Values written or read by the same kernel never share bytes, with one exception: a
// CPU convolution's output (conv2d_nhwc) takes its residual's bytes when the residual is an
// arena value read by no later kernel (buffer_plan.cpp says why that is safe). Kernels that run
// at the same time (`together`, SchedulePolicy::runs_together: per kernel, the last kernel of
// its run) count as one kernel for that rule: a value read in a run lives to the run's end.
#pragma once

#include <utility>
#include <vector>

#include "codegen/kernel_ir.h"

namespace zc::codegen {

BufferPlan plan_buffers(const Schedule& s, const std::vector<int32_t>& together = {});

// The (graph input, graph output) pairs a caller may give one buffer: by the same rule, an
// output written by a convolution over an input that is its residual and dies there
// (Executable::outputs_over_inputs).
std::vector<std::pair<size_t, size_t>> outputs_over_inputs(const Schedule& s,
                                                           const BufferPlan& plan);

// Values kernel k reads from memory (inputs, constants, other kernels' stores), by base.
std::vector<ir::ValueId> kernel_reads(const Schedule& s, const Kernel& k);

}  // namespace zc::codegen
