#include "runtime/dynamic/dims.h"

#include <algorithm>
#include <future>
#include <map>
#include <optional>

#include "cache/cache.h"
#include "capture/capture.h"
#include "ir/canonical.h"
#include "runtime/driver/backend_layout.h"
#include "runtime/dynamic/templates.h"
#include "runtime/regions/plan.h"
#include "toolchain/build_priority.h"
#include "util/log.h"
#include "util/parallel.h"
#include "util/timer.h"
#include "zc/factories.h"

namespace zc::runtime {

DynamicShapes::Kind DynamicShapes::make_kind(std::span<const Tensor> inputs, bool training) const {
  Kind kind;
  kind.training = training;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const size_t rank = x.shape().size();
    kind.inputs.push_back({rank, x.dtype(), x.device()});
    kind.first.push_back(kind.ranges.size());
    for (size_t d = 0; d < rank; ++d) {
      kind.ranges.push_back(DynamicRange{i, static_cast<int64_t>(d)});
      kind.eligible.push_back(mode_ == Dynamic::All);
    }
  }
  kind.seen.resize(kind.ranges.size());
  kind.dynamic.resize(kind.ranges.size());
  kind.first_symbol.assign(kind.ranges.size(), -1);
  for (const DynamicDim& m : marked_) {
    if (m.input >= inputs.size()) {
      throw Error("compile: dynamic_dims marks input " + std::to_string(m.input) +
                  ", but the module was called with " + std::to_string(inputs.size()) +
                  " input(s); mark an input in [0, " + std::to_string(inputs.size()) + ")");
    }
    const Tensor& x = inputs[m.input];
    const int64_t rank = static_cast<int64_t>(x.shape().size());
    int64_t d = m.dim < 0 ? m.dim + rank : m.dim;
    if (d < 0 || d >= rank) {
      throw Error("compile: dynamic_dims marks dim " + std::to_string(m.dim) + " of input " +
                  std::to_string(m.input) + ", of rank " + std::to_string(rank) + " (" +
                  shape_str(x.shape()) + "); mark a dim in [-rank, rank)");
    }
    const size_t at = kind.first[m.input] + static_cast<size_t>(d);
    kind.eligible[at] = true;
    kind.ranges[at].min = std::max<int64_t>(m.min, 2);
    kind.ranges[at].max = m.max;
  }
  return kind;
}

DynamicShapes::Kind* DynamicShapes::find_kind(std::span<const Tensor> inputs, bool training) {
  auto same_kind = [&](const Kind& k) {
    if (k.training != training || k.inputs.size() != inputs.size()) return false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!(k.inputs[i] ==
            InputKind{inputs[i].shape().size(), inputs[i].dtype(), inputs[i].device()})) {
        return false;
      }
    }
    return true;
  };
  auto it = std::find_if(kinds_.begin(), kinds_.end(), same_kind);
  return it == kinds_.end() ? nullptr : &*it;
}

GuardMiss DynamicShapes::on_guard_miss(std::span<const Tensor> inputs, bool can_template,
                                       bool training) {
  Kind* found = find_kind(inputs, training);
  GuardMiss miss;
  const bool first = found == nullptr;
  if (first) {
    kinds_.push_back(make_kind(inputs, training));  // validates the marks against these inputs
    found = &kinds_.back();
    miss.changed = "a new kind of input";
  }
  Kind& kind = *found;
  auto size_of = [&](size_t at) {
    const DynamicRange& r = kind.ranges[at];
    return inputs[r.input].shape()[static_cast<size_t>(r.dim)];
  };
  // What may be dynamic: the eligible dims, and under Auto any dim once it shows a second size.
  std::vector<bool> now(kind.ranges.size(), false);
  bool joins = false;
  for (size_t at = 0; at < kind.ranges.size(); ++at) {
    const int64_t size = size_of(at);
    if (size < 2) continue;  // 0 and 1 are specialized
    std::vector<int64_t>& seen = kind.seen[at];
    if (std::find(seen.begin(), seen.end(), size) != seen.end()) continue;
    const bool second = !seen.empty();
    if (second) {
      std::string before;
      for (int64_t v : seen) before += (before.empty() ? "" : ", ") + std::to_string(v);
      const DynamicRange& r = kind.ranges[at];
      const std::string input =
          inputs.size() > 1 ? "input " + std::to_string(r.input) + " " : std::string();
      miss.changed += (miss.changed.empty() ? "" : "; ") + input +
                      ("dim " + std::to_string(r.dim) + " = " + std::to_string(size) + " (seen " +
                       before + ")");
    }
    seen.push_back(size);
    const bool in_range = size >= kind.ranges[at].min && size <= kind.ranges[at].max;
    if (in_range && (kind.eligible[at] || (mode_ == Dynamic::Auto && second))) {
      now[at] = true;
      joins = joins || !kind.dynamic[at];
    }
  }
  if (miss.changed.empty()) miss.changed = "a size 0 or 1, or another layout";
  // A template is made when a dim joins the dynamic set; the set then holds every dynamic dim
  // of this kind of call that this size can join.
  if (mode_ == Dynamic::Static || !can_template) return miss;
  if (!joins) {
    if (first && mode_ == Dynamic::Auto) {
      for (size_t at = 0; at < kind.ranges.size(); ++at) {
        if (size_of(at) >= 2) miss.sizes_first.push_back(kind.ranges[at]);
      }
    }
    // Templates made before serve the call when it changed only dynamic dims, each to a size
    // in its range (a size 0 or 1 compiles for itself).
    bool any = false, in_range = true;
    for (size_t at = 0; at < kind.ranges.size(); ++at) {
      if (!kind.dynamic[at]) continue;
      any = true;
      const int64_t size = size_of(at);
      in_range = in_range && size >= kind.ranges[at].min && size <= kind.ranges[at].max;
    }
    miss.expect_served = any && in_range;
    return miss;
  }
  // Served by the first call's templates when each dim was one of their symbols, and the dims
  // that were one symbol there are of one size here.
  std::vector<int64_t> symbol_size;
  miss.expect_served = true;
  for (size_t at = 0; at < kind.ranges.size(); ++at) {
    kind.dynamic[at] = kind.dynamic[at] || now[at];
    if (!kind.dynamic[at] || size_of(at) < 2) continue;
    miss.dynamic.push_back(kind.ranges[at]);
    const int sym = kind.first_symbol[at];
    if (sym < 0) {
      miss.expect_served = false;
      continue;
    }
    if (symbol_size.size() <= static_cast<size_t>(sym)) symbol_size.resize(sym + 1, -1);
    int64_t& size = symbol_size[static_cast<size_t>(sym)];
    if (size >= 0 && size != size_of(at)) miss.expect_served = false;
    size = size_of(at);
  }
  return miss;
}

void DynamicShapes::made_sizes_first(std::span<const Tensor> inputs,
                                     const std::vector<DynamicRange>& covered) {
  Kind* kind = find_kind(inputs, /*training=*/false);
  if (!kind) return;
  std::vector<int64_t> symbol_sizes;  // symbol i: the dims of this size at the call
  for (const DynamicRange& r : covered) {
    const int64_t size = inputs[r.input].shape()[static_cast<size_t>(r.dim)];
    auto s = std::find(symbol_sizes.begin(), symbol_sizes.end(), size);
    if (s == symbol_sizes.end()) s = symbol_sizes.insert(symbol_sizes.end(), size);
    kind->first_symbol[kind->first[r.input] + static_cast<size_t>(r.dim)] =
        static_cast<int>(s - symbol_sizes.begin());
  }
}

void DynamicShapes::templates_missed(std::span<const Tensor> inputs, bool training) {
  Kind* kind = find_kind(inputs, training);
  if (!kind || kind->missed) return;
  kind->missed = true;
  kind->first_symbol.assign(kind->ranges.size(), -1);
  kind->dynamic.assign(kind->ranges.size(), false);
}

namespace {

using Shapes = std::vector<Shape>;  // one per input

std::string shape_list(const std::vector<DynamicRange>& dims, size_t inputs) {
  std::string s;
  for (const DynamicRange& r : dims) {
    s += (s.empty() ? "" : ", ") + (inputs > 1 ? std::to_string(r.input) + ":" : std::string()) +
         std::to_string(r.dim);
  }
  return s;
}

// "input [2,8]", "inputs [2,8], [2,8]".
std::string shapes_str(const Shapes& shapes) {
  std::string s;
  for (const Shape& sh : shapes) s += (s.empty() ? "" : ", ") + shape_str(sh);
  return (shapes.size() > 1 ? "inputs " : "input ") + s;
}

// Traces module at inputs of `shapes`; the graph when the trace has the structure of the
// call's own (`structure`), else nullopt. A size the module refuses (it raised) or one where
// its code takes another branch is not a sample.
std::optional<ir::Graph> trace_at(nn::Module& module, std::span<const Tensor> inputs,
                                  const Shapes& shapes, const Digest& structure,
                                  const codegen::Backend& backend) {
  std::vector<Tensor> probes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    probes.push_back(zeros(shapes[i], inputs[i].dtype(), inputs[i].device()));
  }
  capture::SegmentRunner no_breaks = [](const ir::Graph&,
                                        std::span<const Tensor>) -> std::vector<Tensor> {
    throw Error("a graph break");
  };
  try {
    capture::Captured cap = capture::capture_module(module, probes, no_breaks, true);
    cap.graph = in_backend_layout(std::move(cap.graph), backend);
    if (ir::structure_hash(cap.graph) != structure) return std::nullopt;
    return std::move(cap.graph);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The sizes tried for one dim: the call's own first, then down from it and up from it, in
// its range.
std::vector<int64_t> candidates(int64_t at, const DynamicRange& r, size_t limit) {
  std::vector<int64_t> out{at};
  for (int64_t step = 1; out.size() < limit && step < 4 * static_cast<int64_t>(limit); ++step) {
    if (at - step >= r.min) out.push_back(at - step);
    if (out.size() < limit && at + step <= r.max) out.push_back(at + step);
  }
  return out;
}

// Dynamic dims sampled as one: those of equal size at the call, with their ranges' meet.
struct Group {
  std::vector<DynamicRange> dims;
  DynamicRange range;
  int64_t at = 0;  // the call's size
};

std::vector<Group> group_by_size(std::span<const Tensor> inputs,
                                 const std::vector<DynamicRange>& dims) {
  std::vector<Group> groups;
  for (const DynamicRange& r : dims) {
    const int64_t at = inputs[r.input].shape()[static_cast<size_t>(r.dim)];
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.at == at; });
    if (g == groups.end()) {
      groups.push_back(Group{{}, r, at});
      g = groups.end() - 1;
    }
    g->dims.push_back(r);
    g->range.min = std::max(g->range.min, r.min);
    g->range.max = std::min(g->range.max, r.max);
  }
  return groups;
}

// The call's shapes with every dim of `g` at `size`.
void set_group(Shapes& shapes, const Group& g, int64_t size) {
  for (const DynamicRange& r : g.dims) shapes[r.input][static_cast<size_t>(r.dim)] = size;
}

}  // namespace

std::optional<SizeSamples> trace_size_samples(nn::Module& module, std::span<const Tensor> inputs,
                                              const std::vector<DynamicRange>& dims,
                                              const ir::Graph& captured,
                                              const codegen::Backend& backend,
                                              bool leave_out_refused) {
  std::optional<SizeSamples> result;
  Timer t;
  const Digest structure = ir::structure_hash(captured);
  const std::string who = module.type_name();
  Shapes own;
  for (const Tensor& x : inputs) own.push_back(x.shape());
  std::vector<Group> groups = group_by_size(inputs, dims);
  // A fit of degree 3 in one symbol takes 4 sizes and a fifth to check; with several symbols,
  // degree 2 on a grid of 3 per symbol and a fourth size of each to check (size_poly.h).
  auto per_dim = [&] { return groups.size() == 1 ? size_t{5} : size_t{4}; };
  if (groups.size() > 3 && !leave_out_refused) {
    ZC_LOG(recompiles) << who << ": " << groups.size() << " distinct dynamic sizes; at most 3 "
                       << "compile for all sizes";
    return result;
  }
  // Sizes each group takes with the others at the call's own. Leaving groups out may leave
  // one, which needs a fifth size: each is tried for five then.
  std::vector<std::vector<int64_t>> sizes(groups.size());
  std::map<Shapes, ir::Graph> traces;
  const size_t wanted = leave_out_refused ? 5 : per_dim();
  for (size_t j = 0; j < groups.size(); ++j) {
    for (int64_t c : candidates(groups[j].at, groups[j].range, 12)) {
      Shapes shapes = own;
      set_group(shapes, groups[j], c);
      auto g = c == groups[j].at ? std::optional<ir::Graph>(captured)
                                 : trace_at(module, inputs, shapes, structure, backend);
      if (!g) continue;
      sizes[j].push_back(c);
      traces.emplace(shapes, std::move(*g));
      if (sizes[j].size() == wanted) break;
    }
  }
  for (size_t j = groups.size(); j-- > 0;) {
    const bool few = sizes[j].size() < (leave_out_refused ? 4 : per_dim());
    if (!few) continue;
    ZC_LOG(recompiles) << who << ": dims [" << shape_list(groups[j].dims, inputs.size()) << "] of "
                       << shapes_str(own) << " trace alike at only " << sizes[j].size()
                       << " sizes near " << groups[j].at
                       << (leave_out_refused ? "; they keep their size" : "; it compiles per size");
    if (!leave_out_refused) return result;
    groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(j));
    sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(j));
  }
  if (groups.empty() || groups.size() > 3 || sizes[0].size() < per_dim()) {
    if (!groups.empty()) {
      ZC_LOG(recompiles) << who << ": " << groups.size() << " distinct sizes that trace alike; "
                         << "it keeps its sizes";
    }
    return result;
  }
  const size_t k = groups.size();
  // The samples: every size of the one group, or the grid of the first three of each group
  // and the point of their fourth sizes.
  std::vector<Shapes> samples;
  if (k == 1) {
    for (int64_t c : sizes[0]) {
      Shapes s = own;
      set_group(s, groups[0], c);
      samples.push_back(s);
    }
  } else {
    size_t cells = 1;
    for (size_t j = 0; j < k; ++j) cells *= 3;
    for (size_t c = 0; c < cells; ++c) {
      Shapes s = own;
      size_t rest = c;
      for (size_t j = k; j-- > 0;) {
        set_group(s, groups[j], sizes[j][rest % 3]);
        rest /= 3;
      }
      samples.push_back(s);
    }
    Shapes check = own;
    for (size_t j = 0; j < k; ++j) set_group(check, groups[j], sizes[j][3]);
    samples.push_back(check);
  }
  std::vector<ir::Graph> graphs;
  for (const Shapes& s : samples) {
    auto found = traces.find(s);
    if (found != traces.end()) {
      graphs.push_back(found->second);
      continue;
    }
    auto g = trace_at(module, inputs, s, structure, backend);
    if (!g) {
      ZC_LOG(recompiles) << who << ": its trace at " << shapes_str(s)
                         << " differs; it compiles per size";
      return result;
    }
    graphs.push_back(std::move(*g));
  }
  result.emplace();
  result->graphs = std::move(graphs);
  for (const Group& g : groups) {
    result->dims.insert(result->dims.end(), g.dims.begin(), g.dims.end());
  }
  result->who = who;
  result->described =
      "dims [" + shape_list(result->dims, inputs.size()) + "] of " + shapes_str(own);
  result->trace_ms = t.ms();
  return result;
}

AllSizes make_templates_of_samples(SizeSamples samples, const codegen::Backend& backend,
                                   bool hierarchical, CompileContext& ctx) {
  AllSizes result;
  Timer t;
  const std::string& who = samples.who;
  std::vector<ir::Graph>& graphs = samples.graphs;
  const size_t traced = graphs.size();
  // The families: the whole graph at each sample, or each distinct part at each sample.
  std::vector<std::vector<ir::Graph>> families;
  std::vector<RegionPlan> plans;
  if (hierarchical) {
    plans.resize(graphs.size());
    run_indexed(
        graphs.size(), [&](size_t i) { plans[i] = plan_regions(graphs[i], RegionRule{}); },
        toolchain::compile_threads());
  }
  if (hierarchical && plans[0].outlined_calls > 0) {
    std::vector<Digest> distinct;
    for (size_t i = 0; i < plans[0].parts.size(); ++i) {
      const Digest& h = plans[0].parts[i].hash;
      if (std::find(distinct.begin(), distinct.end(), h) != distinct.end()) continue;
      distinct.push_back(h);
      std::vector<ir::Graph> family;
      for (const RegionPlan& p : plans) {
        if (p.parts.size() != plans[0].parts.size()) {
          ZC_LOG(recompiles) << who << ": its regions change with its sizes; it compiles per size";
          return result;
        }
        family.push_back(p.parts[i].sub.graph);
      }
      families.push_back(std::move(family));
    }
  } else {
    families.push_back(std::move(graphs));
  }
  // Parts whose sizes do not vary (a head over a fixed dim) have nothing to template: each is
  // compiled for its one size when the call needs it, as now.
  std::vector<std::future<std::optional<std::string>>> made;
  for (const auto& family : families) {
    bool varies = false;
    const Digest h0 = ir::graph_hash(family[0]);
    for (const ir::Graph& g : family) varies = varies || ir::graph_hash(g) != h0;
    if (!varies) continue;
    // Side by side, sharing the context: every future is waited for before it goes.
    made.push_back(std::async(std::launch::async, [&family, &backend, &ctx] {
      return make_size_template(family, backend, ctx);
    }));
  }
  result.all = true;
  for (auto& f : made) {
    std::optional<std::string> structure = f.get();  // rethrows a build error
    result.all = result.all && structure.has_value();
    if (structure) result.templates.push_back(std::move(*structure));
  }
  ZC_LOG(recompiles) << who << ": " << samples.described << " are dynamic: " << made.size()
                     << " graph(s) compiled for all their sizes from " << traced
                     << " traced sizes in " << samples.trace_ms + t.ms() << " ms"
                     << (result.all ? "" : " (not all)");
  if (!result.templates.empty()) result.covered = std::move(samples.dims);
  return result;
}

AllSizes make_all_size_templates(nn::Module& module, std::span<const Tensor> inputs,
                                 const std::vector<DynamicRange>& dims, const ir::Graph& captured,
                                 const codegen::Backend& backend, bool hierarchical,
                                 bool leave_out_refused, CompileContext& ctx) {
  std::optional<SizeSamples> samples =
      trace_size_samples(module, inputs, dims, captured, backend, leave_out_refused);
  if (!samples) return {};
  return make_templates_of_samples(std::move(*samples), backend, hierarchical, ctx);
}

bool compile_for_all_sizes(nn::Module& module, std::span<const Tensor> inputs,
                           const std::vector<DynamicRange>& dims, const ir::Graph& captured,
                           const codegen::Backend& backend, bool hierarchical,
                           CompileContext& ctx) {
  return make_all_size_templates(module, inputs, dims, captured, backend, hierarchical,
                                 /*leave_out_refused=*/true, ctx)
      .all;
}

}  // namespace zc::runtime
