#include "runtime/dynamic_shapes.h"

#include <algorithm>
#include <future>
#include <map>
#include <optional>

#include "cache/cache.h"
#include "capture/capture.h"
#include "ir/canonical.h"
#include "runtime/regions.h"
#include "runtime/size_templates.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/factories.h"

namespace zc::runtime {

DynamicShapes::Kind DynamicShapes::make_kind(const Tensor& x) const {
  const size_t rank = x.shape().size();
  Kind kind{rank,
            x.dtype(),
            x.device(),
            std::vector<DynamicRange>(rank),
            std::vector<bool>(rank, mode_ == Dynamic::All),
            std::vector<std::vector<int64_t>>(rank)};
  for (size_t d = 0; d < rank; ++d) kind.ranges[d].dim = static_cast<int64_t>(d);
  for (const DynamicDim& m : marked_) {  // compile() took only marks of input 0
    int64_t d = m.dim < 0 ? m.dim + static_cast<int64_t>(rank) : m.dim;
    if (d < 0 || d >= static_cast<int64_t>(rank)) {
      throw Error("compile: dynamic_dims marks dim " + std::to_string(m.dim) +
                  " of an input of rank " + std::to_string(rank) + " (" + shape_str(x.shape()) +
                  "); mark a dim in [-rank, rank)");
    }
    kind.eligible[d] = true;
    kind.ranges[d].min = std::max<int64_t>(m.min, 2);
    kind.ranges[d].max = m.max;
  }
  return kind;
}

GuardMiss DynamicShapes::on_guard_miss(const Tensor& x, bool can_template) {
  const size_t rank = x.shape().size();
  auto it = std::find_if(kinds_.begin(), kinds_.end(), [&](const Kind& k) {
    return k.rank == rank && k.dtype == x.dtype() && k.device == x.device();
  });
  GuardMiss miss;
  if (it == kinds_.end()) {
    kinds_.push_back(make_kind(x));  // validates the marks against this rank first
    it = kinds_.end() - 1;
    miss.changed = "a new kind of input";
  }
  Kind& kind = *it;
  // What may be dynamic: the eligible dims, and under Auto any dim once it shows a second size.
  uint64_t now = 0;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t size = x.shape()[d];
    if (size < 2) continue;  // 0 and 1 are specialized
    std::vector<int64_t>& seen = kind.seen[d];
    if (std::find(seen.begin(), seen.end(), size) != seen.end()) continue;
    const bool second = !seen.empty();
    if (second) {
      std::string before;
      for (int64_t v : seen) before += (before.empty() ? "" : ", ") + std::to_string(v);
      miss.changed +=
          (miss.changed.empty() ? "" : "; ") +
          ("dim " + std::to_string(d) + " = " + std::to_string(size) + " (seen " + before + ")");
    }
    seen.push_back(size);
    const bool in_range = size >= kind.ranges[d].min && size <= kind.ranges[d].max;
    if (in_range && (kind.eligible[d] || (mode_ == Dynamic::Auto && second))) {
      now |= uint64_t{1} << d;
    }
  }
  if (miss.changed.empty()) miss.changed = "a size 0 or 1, or another layout";
  // A template is made when a dim joins the dynamic set; the set then holds every dynamic dim
  // of this kind of input that this size can join.
  if (mode_ == Dynamic::Static || !can_template || (now & ~kind.dynamic) == 0) return miss;
  kind.dynamic |= now;
  for (size_t d = 0; d < rank; ++d) {
    if (kind.dynamic >> d & 1 && x.shape()[d] >= 2) miss.dynamic.push_back(kind.ranges[d]);
  }
  return miss;
}

namespace {

std::string shape_list(const std::vector<DynamicRange>& dims) {
  std::string s;
  for (const DynamicRange& r : dims) s += (s.empty() ? "" : ", ") + std::to_string(r.dim);
  return s;
}

// Traces module at an input of `shape`; the graph when the trace has the structure of the
// call's own (`structure`), else nullopt. A size the module refuses (it raised) or one where
// its code takes another branch is not a sample.
std::optional<ir::Graph> trace_at(nn::Module& module, const Tensor& x, const Shape& shape,
                                  const Digest& structure) {
  Tensor probe = zeros(shape, x.dtype(), x.device());
  capture::SegmentRunner no_breaks = [](const ir::Graph&,
                                        std::span<const Tensor>) -> std::vector<Tensor> {
    throw Error("a graph break");
  };
  try {
    capture::Captured cap = capture::capture_module(module, probe, no_breaks, true);
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

}  // namespace

bool compile_for_all_sizes(nn::Module& module, const Tensor& x,
                           const std::vector<DynamicRange>& dims, const ir::Graph& captured,
                           const codegen::Backend& backend, bool hierarchical) {
  Timer t;
  const Digest structure = ir::structure_hash(captured);
  const std::string who = module.type_name();
  // A fit of degree 3 in one symbol takes 4 sizes and a fifth to check; with several symbols,
  // degree 2 on a grid of 3 per symbol and a fourth size of each to check (size_poly.h).
  const size_t k = dims.size(), per_dim = k == 1 ? 5 : 4;
  if (k > 3) {
    ZC_LOG(recompiles) << who << ": " << k << " dynamic dims; at most 3 compile for all sizes";
    return false;
  }
  // Sizes each dim takes with the others at the call's own.
  std::vector<std::vector<int64_t>> sizes(k);
  std::map<Shape, ir::Graph> traces;
  for (size_t j = 0; j < k; ++j) {
    const int64_t d = dims[j].dim;
    for (int64_t c : candidates(x.shape()[d], dims[j], 12)) {
      Shape shape = x.shape();
      shape[d] = c;
      auto g = c == x.shape()[d] ? std::optional<ir::Graph>(captured)
                                 : trace_at(module, x, shape, structure);
      if (!g) continue;
      sizes[j].push_back(c);
      traces.emplace(shape, std::move(*g));
      if (sizes[j].size() == per_dim) break;
    }
    if (sizes[j].size() < per_dim) {
      ZC_LOG(recompiles) << who << ": dim " << d << " of input " << shape_str(x.shape())
                         << " traces alike at only " << sizes[j].size() << " sizes near "
                         << x.shape()[d] << "; it compiles per size";
      return false;
    }
  }
  // The samples: every size of the one dim, or the grid of the first three of each dim and
  // the point of their fourth sizes.
  std::vector<Shape> samples;
  if (k == 1) {
    for (int64_t c : sizes[0]) {
      Shape s = x.shape();
      s[dims[0].dim] = c;
      samples.push_back(s);
    }
  } else {
    size_t cells = 1;
    for (size_t j = 0; j < k; ++j) cells *= 3;
    for (size_t c = 0; c < cells; ++c) {
      Shape s = x.shape();
      size_t rest = c;
      for (size_t j = k; j-- > 0;) {
        s[dims[j].dim] = sizes[j][rest % 3];
        rest /= 3;
      }
      samples.push_back(s);
    }
    Shape check = x.shape();
    for (size_t j = 0; j < k; ++j) check[dims[j].dim] = sizes[j][3];
    samples.push_back(check);
  }
  std::vector<ir::Graph> graphs;
  for (const Shape& s : samples) {
    auto found = traces.find(s);
    if (found != traces.end()) {
      graphs.push_back(found->second);
      continue;
    }
    auto g = trace_at(module, x, s, structure);
    if (!g) {
      ZC_LOG(recompiles) << who << ": its trace at " << shape_str(s)
                         << " differs; it compiles per size";
      return false;
    }
    graphs.push_back(std::move(*g));
  }
  // The families: the whole graph at each sample, or each distinct part at each sample.
  std::vector<std::vector<ir::Graph>> families;
  std::vector<RegionPlan> plans;
  if (hierarchical) {
    for (const ir::Graph& g : graphs) plans.push_back(plan_regions(g, RegionRule{}));
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
          return false;
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
  std::vector<std::future<bool>> made;
  cache::Cache* store = &cache::process_cache();
  for (const auto& family : families) {
    bool varies = false;
    const Digest h0 = ir::graph_hash(family[0]);
    for (const ir::Graph& g : family) varies = varies || ir::graph_hash(g) != h0;
    if (!varies) continue;
    made.push_back(std::async(std::launch::async, [&family, &backend, store] {
      return make_size_template(family, backend, store);
    }));
  }
  bool all = true;
  for (auto& f : made) all = f.get() && all;  // rethrows a build error
  ZC_LOG(recompiles) << who << ": dims [" << shape_list(dims) << "] of input "
                     << shape_str(x.shape()) << " are dynamic: " << made.size()
                     << " graph(s) compiled for all their sizes from " << samples.size()
                     << " traced sizes in " << t.ms() << " ms" << (all ? "" : " (not all)");
  return all;
}

}  // namespace zc::runtime
