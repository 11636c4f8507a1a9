#include "codegen/backends/cuda/packs.h"

#include <algorithm>

namespace zc::codegen::cuda {

namespace {

// Whether launch l may be a member of a pack at all (packs.h).
bool packable(const Launch& l) {
  if (!l.has_kernel || l.library || l.conv || l.work == 0) return false;
  switch (l.kind) {
    case KernelKind::attention:
    case KernelKind::extern_op:
      return false;
    case KernelKind::matmul:
      return l.grid_y == 1 && l.grid_z <= 1;
    default:
      return true;
  }
}

// Where a pack's members may touch the same memory.
class Overlaps {
 public:
  Overlaps(const Schedule& s, const BufferPlan& plan)
      : s_(s), plan_(plan), over_inputs_(outputs_over_inputs(s, plan)) {}

  // Whether values a and b (bases) may share bytes, one of them being written (an arena value
  // or a graph output: kernels write nothing else).
  bool operator()(ir::ValueId a, ir::ValueId b) const {
    if (a == b) return true;
    const BufferPlan::Slot& x = plan_.slot[a];
    const BufferPlan::Slot& y = plan_.slot[b];
    if (x.kind == BufferKind::arena && y.kind == BufferKind::arena) {
      return x.index < y.index + bytes(b) && y.index < x.index + bytes(a);
    }
    // The caller gives each output its own memory, and an output an input's only where the
    // executable offers it (outputs_over_inputs); constants and the arena are the
    // executable's own.
    if (x.kind == BufferKind::output && y.kind == BufferKind::input) return over(y, x);
    if (x.kind == BufferKind::input && y.kind == BufferKind::output) return over(x, y);
    return false;
  }

 private:
  int64_t bytes(ir::ValueId v) const {
    const ops::TensorMeta& m = s_.graph.meta(v);
    return shape_numel(m.shape) * static_cast<int64_t>(dtype_size(m.dtype));
  }
  bool over(const BufferPlan::Slot& input, const BufferPlan::Slot& output) const {
    return std::find(over_inputs_.begin(), over_inputs_.end(),
                     std::make_pair(static_cast<size_t>(input.index),
                                    static_cast<size_t>(output.index))) != over_inputs_.end();
  }

  const Schedule& s_;
  const BufferPlan& plan_;
  std::vector<std::pair<size_t, size_t>> over_inputs_;
};

struct Footprint {
  std::vector<ir::ValueId> writes, touches;
};

Footprint footprint(const Schedule& s, const Launch& l, const Kernel& k) {
  Footprint f;
  for (ir::ValueId v : k.stores) f.writes.push_back(s.base_of(v));
  f.touches = l.buffers;
  return f;
}

template <class Overlap>
bool conflict(const Overlap& overlap, const Footprint& a, const Footprint& b) {
  for (ir::ValueId w : a.writes) {
    for (ir::ValueId t : b.touches) {
      if (overlap(w, t)) return true;
    }
  }
  for (ir::ValueId w : b.writes) {
    for (ir::ValueId t : a.touches) {
      if (overlap(w, t)) return true;
    }
  }
  return false;
}

// Runs of launches to pack, as [first, end) pairs: from each launch, the longest run of
// packable launches of its block shape none of which conflicts with an earlier one.
template <class Overlap>
std::vector<std::pair<size_t, size_t>> runs(const Schedule& s, const std::vector<Launch>& launches,
                                            const Overlap& overlap) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t k = 0;
  while (k < launches.size()) {
    if (!packable(launches[k])) {
      ++k;
      continue;
    }
    std::vector<Footprint> taken{footprint(s, launches[k], s.kernels[k])};
    size_t end = k + 1;
    while (end < launches.size() && end - k < kMaxPackMembers) {
      const Launch& l = launches[end];
      if (!packable(l) || l.block_x != launches[k].block_x || l.block_y != launches[k].block_y)
        break;
      Footprint f = footprint(s, l, s.kernels[end]);
      if (std::any_of(taken.begin(), taken.end(),
                      [&](const Footprint& t) { return conflict(overlap, t, f); })) {
        break;
      }
      taken.push_back(std::move(f));
      ++end;
    }
    if (end - k >= 2) out.emplace_back(k, end);
    k = end;
  }
  return out;
}

}  // namespace

std::string pack_symbol(size_t first) {
  return "zc_pack" + std::to_string(first);
}

std::vector<int32_t> pack_runs(const Schedule& s) {
  if (s.symbolic()) return {};
  // Values alone: the buffer plan is what this decides.
  auto same_value = [](ir::ValueId a, ir::ValueId b) { return a == b; };
  std::vector<int32_t> until(s.kernels.size());
  for (size_t k = 0; k < until.size(); ++k) until[k] = static_cast<int32_t>(k);
  for (auto [first, end] : runs(s, unpacked_launch_plan(s), same_value)) {
    for (size_t k = first; k < end; ++k) until[k] = static_cast<int32_t>(end - 1);
  }
  return until;
}

void pack_launches(const Schedule& s, const BufferPlan& plan, std::vector<Launch>& launches) {
  if (s.symbolic()) return;
  for (auto [first, end] : runs(s, launches, Overlaps(s, plan))) {
    Launch::Pack pack;
    for (size_t m = first; m < end; ++m) {
      pack.members.push_back(static_cast<int32_t>(m));
      pack.buffers.insert(pack.buffers.end(), launches[m].buffers.begin(),
                          launches[m].buffers.end());
      pack.error_flag = pack.error_flag || launches[m].error_flag;
      if (m > first) launches[m].packed_into = static_cast<int32_t>(first);
    }
    std::sort(pack.buffers.begin(), pack.buffers.end());
    pack.buffers.erase(std::unique(pack.buffers.begin(), pack.buffers.end()), pack.buffers.end());
    launches[first].pack = std::move(pack);
  }
}

}  // namespace zc::codegen::cuda
