#include "lower/partition.h"

#include <algorithm>

#include "lower/dce.h"
#include "util/check.h"
#include "util/min_cut.h"

namespace zc::lower {

namespace {

// Ops cheap enough to run again in the backward rather than keep their outputs: they read
// each input element about once and fuse into the backward kernel that reads their output.
bool recomputable(ops::OpId op) {
  return ops::is_elementwise(op) || ops::op_def(op).cls == ops::OpClass::layout ||
         op == ops::OpId::embedding;
}

int64_t bytes_of(const ops::TensorMeta& m) {
  return shape_numel(m.shape) * static_cast<int64_t>(dtype_size(m.dtype));
}

// Per node of `g`: whether it lies in a checkpointed region (kCheckpointRegion) or one inside
// such a region.
std::vector<bool> checkpointed_nodes(const ir::Graph& g) {
  std::vector<bool> region(g.regions.size(), false);
  for (size_t r = 0; r < g.regions.size(); ++r) {
    const ir::Region& reg = g.regions[r];
    // Parents come before their children.
    region[r] = reg.type_name == kCheckpointRegion ||
                (reg.parent != ir::kNoRegion && region[static_cast<size_t>(reg.parent)]);
  }
  std::vector<bool> out(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::RegionId r = g.nodes[i].region;
    out[i] = r != ir::kNoRegion && region[static_cast<size_t>(r)];
  }
  return out;
}

// Per value of `g`: whether a checkpointed node makes it and it stays inside (only
// checkpointed nodes read it, and it is no output of the graph): it is never saved.
std::vector<bool> internal_values(const ir::Graph& g, const std::vector<bool>& checkpointed) {
  std::vector<bool> out(g.values.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!checkpointed[i]) continue;
    for (ir::ValueId v : g.nodes[i].outputs) out[v] = true;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (checkpointed[i]) continue;
    for (ir::ValueId u : g.nodes[i].inputs) out[u] = false;
  }
  for (ir::ValueId v : g.outputs) out[v] = false;
  return out;
}

// The work of running node p again, in units comparable across ops: a product's or an
// attention's multiply-adds over 64 (what a GPU or a CPU core does in the time it reads a byte,
// roughly), any other op's input elements.
int64_t recompute_work(const ir::Graph& g, int32_t p) {
  const ir::Node& n = g.nodes[p];
  const ops::OpId op = n.op;
  if (op == ops::OpId::matmul || op == ops::OpId::linear) {
    const Shape& a = g.meta(n.inputs[0]).shape;
    const int64_t k = a.empty() ? 1 : a.back();
    return std::max<int64_t>(1, shape_numel(g.meta(n.outputs[0]).shape) * k / 64);
  }
  if (op == ops::OpId::attention) {
    const Shape& q = g.meta(n.inputs[0]).shape;
    const Shape& k = g.meta(n.inputs[1]).shape;
    const int64_t keys = k.size() >= 2 ? k[k.size() - 2] : 1;
    return std::max<int64_t>(1, 2 * shape_numel(q) * keys / 64);
  }
  int64_t elements = 0;
  for (ir::ValueId u : n.inputs) elements += shape_numel(g.meta(u).shape);
  return std::max<int64_t>(1, elements);
}

// What the cut is made from, per value of the captured graph (costless: free to keep; read: the
// backward reads it; internal: kept inside a checkpointed region) and per node (checkpointed).
struct Facts {
  const ir::Graph& captured;
  std::vector<bool> costless, read, checkpointed, internal;
};

// Which forward values the backward keeps (saved, or free to keep), by the minimum cut the
// header describes. Each non-free forward value v is an edge in(v) -> out(v) whose capacity is
// its cost to save; a recomputable node's inputs feed its outputs' in() vertices; everything
// that is not recomputable (and the free values) hangs off the source; what the backward reads
// runs into the sink. A value is kept when its edge is cut.
//
// Under a budget (`rate` >= 0) every node may be recomputed: one that is not cheap hangs off the
// source by an edge of `rate` times its work (recompute_work), which the cut pays when the
// backward runs it again, and its inputs feed it as a cheap node's do. `saved` receives the
// bytes the cut keeps (the free values aside).
//
// Nodes in a checkpointed region are recomputed at no cost, and the values they keep inside
// cannot be saved (Facts).
std::vector<bool> kept_values(const Facts& f, double rate, int64_t* saved) {
  const ir::Graph& captured = f.captured;
  const std::vector<bool>&costless = f.costless, &read = f.read, &checkpointed = f.checkpointed,
        &internal = f.internal;
  const int n = static_cast<int>(captured.values.size());
  const int s = 2 * n, t = 2 * n + 1;
  auto in = [](int v) { return 2 * v; };
  auto out = [](int v) { return 2 * v + 1; };
  MinCut cut(2 * n + 2);
  for (int v = 0; v < n; ++v) {
    if (costless[v]) {
      cut.add_edge(s, out(v), MinCut::kInfinite);
      continue;
    }
    if (read[v]) cut.add_edge(out(v), t, MinCut::kInfinite);
    const int32_t p = captured.values[v].producer;
    ZC_CHECK(p >= 0, "partition: value %" << v << " is neither an input nor a node output");
    // Saving costs bytes; among equal byte counts, a value the backward reads directly costs
    // less than one it would only recompute from.
    cut.add_edge(
        in(v), out(v),
        internal[v] ? MinCut::kInfinite : bytes_of(captured.meta(v)) * 4 + (read[v] ? 1 : 2));
    const ir::Node& node = captured.nodes[p];
    const bool cheap = recomputable(node.op) || checkpointed[p];
    if (cheap || rate >= 0) {
      // Under a budget or a checkpoint a free input (a parameter, say) does not tie its reader
      // to the forward: the backward has it too. Elsewhere the cut stays the one made before
      // budgets and checkpoints were.
      const bool free_inputs_bind = rate < 0 && !checkpointed[p];
      for (ir::ValueId u : node.inputs) {
        if (free_inputs_bind || !costless[u]) cut.add_edge(out(u), in(v), MinCut::kInfinite);
      }
    }
    if (!cheap) {
      const double pay = rate * 4 * static_cast<double>(recompute_work(captured, p));
      cut.add_edge(s, in(v),
                   rate < 0 || pay >= static_cast<double>(MinCut::kInfinite)
                       ? MinCut::kInfinite
                       : static_cast<int64_t>(pay));
    }
  }
  std::vector<bool> side = cut.source_side(s, t);
  std::vector<bool> kept(n, false);
  *saved = 0;
  for (int v = 0; v < n; ++v) {
    kept[v] = costless[v] || (side[in(v)] && !side[out(v)]);
    if (kept[v] && !costless[v]) *saved += bytes_of(captured.meta(v));
  }
  return kept;
}

// The cut for `budget` (partition.h): the cut of least recomputation whose saved bytes are
// within budget * (what budget 1 saves - what recomputing everything saves) over the latter.
// Saved bytes fall as the rate falls, so the rate is found by bisection: first over powers of
// two, then between the two that bracket the target.
std::vector<bool> kept_within(const Facts& f, double budget) {
  int64_t most = 0, least = 0, saved = 0;
  std::vector<bool> kept = kept_values(f, -1, &most);
  if (budget >= 1) return kept;
  std::vector<bool> fewest = kept_values(f, 0, &least);
  const double target =
      static_cast<double>(least) + budget * static_cast<double>(std::max<int64_t>(most - least, 0));
  if (least >= most) return kept;  // recomputing saves nothing here
  // The largest rate whose cut fits: lo fits, hi does not (or is the budget-1 cut).
  double lo = 0, hi = 1.0 / 1024;
  std::vector<bool> best = fewest;
  while (hi < 1e12) {
    std::vector<bool> k = kept_values(f, hi, &saved);
    if (static_cast<double>(saved) > target) break;
    lo = hi;
    best = std::move(k);
    hi *= 2;
  }
  for (int i = 0; i < 24; ++i) {
    const double mid = (lo + hi) / 2;
    std::vector<bool> k = kept_values(f, mid, &saved);
    if (static_cast<double>(saved) <= target) {
      lo = mid;
      best = std::move(k);
    } else {
      hi = mid;
    }
  }
  return best;
}

// Region ranges from the nodes placed in each region and its descendants. Regions left without
// nodes (the forward's, whose recomputed nodes moved into mirror regions) are dropped: an empty
// region at a block's start would be taken into that block's subgraph and make the first copy
// of a repeated block differ from the others.
void set_regions(ir::Graph& g) {
  const std::vector<bool> seen = g.fit_region_ranges();
  // A region with nodes has a parent with nodes, so parents keep coming first.
  std::vector<ir::RegionId> renumber(g.regions.size(), ir::kNoRegion);
  std::vector<ir::Region> kept;
  for (size_t r = 0; r < g.regions.size(); ++r) {
    if (!seen[r]) continue;
    renumber[r] = static_cast<ir::RegionId>(kept.size());
    ir::Region reg = g.regions[r];
    if (reg.parent != ir::kNoRegion) reg.parent = renumber[reg.parent];
    kept.push_back(std::move(reg));
  }
  g.regions = std::move(kept);
  for (ir::Node& n : g.nodes) {
    if (n.region != ir::kNoRegion) n.region = renumber[n.region];
  }
}

}  // namespace

Partition partition(const ir::Graph& captured, const JointGraph& joint, double budget) {
  const ir::Graph& j = joint.graph;
  const size_t n_values = captured.values.size();
  const size_t n_nodes = captured.nodes.size();
  const size_t n_outputs = captured.outputs.size();
  ZC_CHECK(j.nodes.size() >= n_nodes && j.values.size() >= n_values &&
               j.outputs.size() >= n_outputs &&
               j.inputs.size() == captured.inputs.size() + n_outputs,
           "partition: the joint graph was not made from this captured graph");

  std::vector<bool> costless(n_values, false), read(n_values, false);
  std::vector<int64_t> output_index(n_values, -1);
  for (const ir::Input& in : captured.inputs) costless[in.value] = true;
  for (const ir::Constant& c : captured.constants) costless[c.value] = true;
  for (size_t k = n_outputs; k-- > 0;) {
    costless[captured.outputs[k]] = true;
    output_index[captured.outputs[k]] = static_cast<int64_t>(k);
  }
  for (size_t i = n_nodes; i < j.nodes.size(); ++i) {
    for (ir::ValueId v : j.nodes[i].inputs) {
      if (static_cast<size_t>(v) < n_values) read[v] = true;
    }
  }
  for (size_t k = n_outputs; k < j.outputs.size(); ++k) {
    if (static_cast<size_t>(j.outputs[k]) < n_values) read[j.outputs[k]] = true;
  }
  Facts facts{captured, std::move(costless), std::move(read), checkpointed_nodes(captured), {}};
  facts.internal = internal_values(captured, facts.checkpointed);
  const std::vector<bool> kept = kept_within(facts, budget);
  const std::vector<bool>& checkpointed = facts.checkpointed;

  // The backward graph: the joint graph's values, its backward nodes, and the recomputed
  // forward nodes each needs, emitted just before it.
  ir::Graph b;
  b.values = j.values;
  b.inputs = j.inputs;
  b.constants = j.constants;
  b.regions = j.regions;
  std::vector<bool> ready(j.values.size(), false);
  for (const ir::Input& in : j.inputs) ready[in.value] = true;
  for (const ir::Constant& c : j.constants) ready[c.value] = true;
  std::vector<ir::ValueId> saved;
  auto emit = [&](ir::Node node) {
    for (ir::ValueId o : node.outputs) {
      ready[o] = true;
      b.values[o].producer = static_cast<int32_t>(b.nodes.size());
    }
    b.nodes.push_back(std::move(node));
  };
  auto ensure = [&](auto& self, ir::ValueId v, ir::RegionId region) -> void {
    if (ready[v]) return;
    ZC_CHECK(static_cast<size_t>(v) < n_values,
             "partition: backward value %" << v << " is read before it is defined");
    if (kept[v]) {
      ready[v] = true;
      b.values[v].producer = -1;
      saved.push_back(v);
      return;
    }
    const int32_t p = captured.values[v].producer;
    ZC_CHECK(p >= 0 && (recomputable(j.nodes[p].op) || budget < 1 || checkpointed[p]),
             "partition: value %" << v << " is neither kept nor recomputable");
    ir::Node node = j.nodes[p];
    for (ir::ValueId u : node.inputs) self(self, u, region);
    node.region = region;
    emit(std::move(node));
  };
  for (size_t i = n_nodes; i < j.nodes.size(); ++i) {
    for (ir::ValueId u : j.nodes[i].inputs) ensure(ensure, u, j.nodes[i].region);
    emit(j.nodes[i]);
  }
  b.outputs.assign(j.outputs.begin() + static_cast<std::ptrdiff_t>(n_outputs), j.outputs.end());
  for (ir::ValueId v : b.outputs) ensure(ensure, v, ir::kNoRegion);

  std::sort(saved.begin(), saved.end());
  Partition result;
  result.forward = captured;
  for (ir::ValueId v : saved) {
    b.inputs.push_back(ir::Input{v, ir::InputKind::carried});
    if (output_index[v] < 0) {
      output_index[v] = static_cast<int64_t>(result.forward.outputs.size());
      result.forward.outputs.push_back(v);
    }
    result.saved.push_back(static_cast<size_t>(output_index[v]));
  }
  set_regions(b);
  result.backward = eliminate_dead_code(b);
  return result;
}

}  // namespace zc::lower
