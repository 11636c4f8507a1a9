#include "codegen/buffer_plan.h"

#include <algorithm>
#include <optional>

#include "ops/attrs.h"
#include "util/check.h"
#include "util/free_ranges.h"

namespace zc::codegen {

std::vector<ir::ValueId> kernel_reads(const Schedule& s, const Kernel& k) {
  std::vector<ir::ValueId> out;
  auto add = [&](ir::ValueId u) {
    ir::ValueId base = s.base_of(u);
    if (s.at(base).state == ValueState::fused) return;  // a register of this kernel
    if (s.at(base).kernel >= 0 && &s.kernels[s.at(base).kernel] == &k) return;
    out.push_back(base);
  };
  for (int32_t idx : k.nodes) {
    for (ir::ValueId u : s.graph.nodes[idx].inputs) add(u);
  }
  if (k.copy_from >= 0) add(k.copy_from);
  return out;
}

namespace {
// Per value, the last kernel that reads it from memory (-1: none).
std::vector<int32_t> last_readers(const Schedule& s) {
  std::vector<int32_t> last(s.graph.values.size(), -1);
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    for (ir::ValueId v : kernel_reads(s, s.kernels[k])) last[v] = static_cast<int32_t>(k);
  }
  return last;
}

// A CPU convolution with a residual (conv2d_nhwc, an extern op) adds the residual to its
// output: cpu::OnednnConv through oneDNN's sum post-op, which reads each element of the output's
// earlier contents before it writes it. So where the residual dies at the convolution, the
// output may lie over it and the residual needs no copy into the output first (a ResNet-50
// call copied 1.2 ms of residuals on 2 cores; docs/adr/0033). The residual must be a whole
// value (not a view) and no other input of the node: the convolution still reads those while
// it writes.
//
// The residual of kernel k when k is such a convolution writing v and the last kernel to read
// the residual; else -1.
ir::ValueId residual_dying_at(const Schedule& s, const Kernel& k, ir::ValueId v,
                              const std::vector<int32_t>& last, int32_t kernel) {
  if (k.kind != KernelKind::extern_op || k.anchor < 0) return -1;
  const ir::Node& n = s.graph.nodes[k.anchor];
  if (n.op != ops::OpId::conv2d_nhwc || !std::get<ops::Conv2dAttrs>(n.attrs).residual) return -1;
  if (n.outputs.size() != 1 || n.outputs[0] != v || !s.graph.meta(v).device.is_cpu()) return -1;
  const ir::ValueId r = n.inputs.back();
  if (s.base_of(r) != r || last[r] != kernel) return -1;
  for (size_t i = 0; i + 1 < n.inputs.size(); ++i) {
    if (s.base_of(n.inputs[i]) == r) return -1;
  }
  const ops::TensorMeta &mv = s.graph.meta(v), &mr = s.graph.meta(r);
  return mv.shape == mr.shape && mv.dtype == mr.dtype ? r : -1;
}

// The residual whose arena range kernel k's store v takes over, or -1.
ir::ValueId residual_taken_over(const Schedule& s, const Kernel& k, ir::ValueId v,
                                const std::vector<int32_t>& last, int32_t kernel,
                                const BufferPlan& plan) {
  const ir::ValueId r = residual_dying_at(s, k, v, last, kernel);
  if (r < 0 || s.at(r).state != ValueState::stored) return -1;
  return plan.slot[r].kind == BufferKind::arena ? r : -1;
}
}  // namespace

BufferPlan plan_buffers(const Schedule& s, const std::vector<int32_t>& together) {
  const ir::Graph& g = s.graph;
  BufferPlan plan;
  plan.slot.assign(g.values.size(), BufferPlan::Slot{});
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    plan.slot[g.inputs[i].value] = {BufferKind::input, static_cast<int64_t>(i)};
  }
  for (size_t i = 0; i < g.constants.size(); ++i) {
    plan.slot[g.constants[i].value] = {BufferKind::constant, static_cast<int64_t>(i)};
    plan.constants.push_back(g.constants[i].value);
  }
  std::vector<bool> is_output(g.values.size(), false);
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    plan.slot[s.outputs[i]] = {BufferKind::output, static_cast<int64_t>(i)};
    is_output[s.outputs[i]] = true;
  }
  // Lifetimes of arena values: [writer, last reader].
  size_t nk = s.kernels.size();
  ZC_CHECK(together.empty() || together.size() == nk,
           "runs_together gave " << together.size() << " kernels' runs for " << nk);
  const std::vector<int32_t> last = last_readers(s);
  FreeRanges arena;
  std::vector<std::vector<ir::ValueId>> dies_after(nk);
  std::vector<int64_t> size_of(g.values.size(), 0);
  std::vector<bool> handed_on(g.values.size(), false);  // its bytes became a later value's
  // A residual that dies at a convolution writing a graph output is written into that output
  // in the first place (the output of a block that ends in a convolution over the block's
  // downsampled input), by the same rule as below.
  std::vector<std::optional<BufferPlan::Slot>> in_output(g.values.size());
  for (size_t k = 0; k < nk; ++k) {
    for (ir::ValueId v : s.kernels[k].stores) {
      if (!is_output[v] || std::count(s.outputs.begin(), s.outputs.end(), v) != 1) continue;
      const ir::ValueId r = residual_dying_at(s, s.kernels[k], v, last, static_cast<int32_t>(k));
      if (r >= 0 && s.at(r).state == ValueState::stored && !is_output[r])
        in_output[r] = plan.slot[v];
    }
  }
  for (size_t k = 0; k < nk; ++k) {
    const int32_t kernel = static_cast<int32_t>(k);
    for (ir::ValueId v : s.kernels[k].stores) {
      if (is_output[v]) continue;
      ZC_CHECK(s.at(v).state == ValueState::stored,
               "stored value %" << v << " has the wrong state");
      const ops::TensorMeta& m = g.meta(v);
      size_of[v] = FreeRanges::aligned(std::max<int64_t>(shape_numel(m.shape), 1) *
                                       static_cast<int64_t>(dtype_size(m.dtype)));
      const ir::ValueId r = residual_taken_over(s, s.kernels[k], v, last, kernel, plan);
      if (in_output[v]) {
        plan.slot[v] = *in_output[v];
        handed_on[v] = true;
      } else if (r >= 0) {
        plan.slot[v] = plan.slot[r];
        handed_on[r] = true;
      } else {
        plan.slot[v] = {BufferKind::arena, arena.allocate(size_of[v])};
      }
      // Released after the last kernel of the run its last reader is in.
      const int32_t dies = std::max<int32_t>(last[v], kernel);
      dies_after[together.empty() ? dies : together[dies]].push_back(v);
    }
    for (ir::ValueId v : dies_after[k]) {
      if (!handed_on[v]) arena.release(plan.slot[v].index, size_of[v]);
    }
  }
  plan.arena_bytes = arena.top();
  return plan;
}

std::vector<std::pair<size_t, size_t>> outputs_over_inputs(const Schedule& s,
                                                           const BufferPlan& plan) {
  std::vector<std::pair<size_t, size_t>> pairs;
  const std::vector<int32_t> last = last_readers(s);
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    for (ir::ValueId v : s.kernels[k].stores) {
      if (plan.slot[v].kind != BufferKind::output || last[v] > static_cast<int32_t>(k)) continue;
      if (std::count(s.outputs.begin(), s.outputs.end(), v) != 1) continue;
      const ir::ValueId r = residual_dying_at(s, s.kernels[k], v, last, static_cast<int32_t>(k));
      if (r < 0 || plan.slot[r].kind != BufferKind::input) continue;
      pairs.emplace_back(static_cast<size_t>(plan.slot[r].index),
                         static_cast<size_t>(plan.slot[v].index));
    }
  }
  return pairs;
}

}  // namespace zc::codegen
