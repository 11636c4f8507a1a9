#include "runtime/debug/accuracy_bisect.h"

#include <algorithm>

#include "codegen/backends/eager/interpreter.h"
#include "codegen/pipeline.h"
#include "ir/canonical.h"
#include "ir/subgraph.h"
#include "lower/pipeline.h"
#include "runtime/debug/accuracy_compare.h"
#include "runtime/driver/compile_graph.h"
#include "util/check.h"
#include "util/log.h"

namespace zc::runtime {

namespace {

// The value of a prefix that diverged, or none.
struct Divergence {
  bool diverged = false;
  ir::ValueId value = -1;  // in the lowered graph
  AccuracyOutput diff;
};

class Search {
 public:
  Search(ir::Graph lowered, std::span<const Tensor> inputs, const codegen::Backend& backend,
         const AccuracyCheck& check, bool bf16)
      : g_(std::move(lowered)), extract_(g_), backend_(backend), check_(check), bf16_(bf16) {
    ZC_CHECK(inputs.size() == g_.inputs.size(),
             "bisect: " << inputs.size() << " values for " << g_.inputs.size() << " inputs");
    env_.resize(g_.values.size());
    host_env_.resize(g_.values.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& x = inputs[i];
      env_[g_.inputs[i].value] = x;
      host_env_[g_.inputs[i].value] = x.device().is_cpu() ? x : x.to(Device::cpu());
    }
  }

  const ir::Graph& graph() const { return g_; }
  int compiles() const { return compiles_; }

  // The first `k` nodes compiled against the same nodes interpreted.
  Divergence prefix(int32_t k) {
    ir::RegionGraph r = extract_.range(0, k);
    Divergence out;
    if (r.graph.outputs.empty()) return out;
    std::vector<const Tensor*> args, host_args;
    for (ir::ValueId v : r.inputs) {
      ZC_CHECK(env_[v].defined(), "bisect: prefix input %" << v << " is no graph input");
      args.push_back(&env_[v]);
      host_args.push_back(&host_env_[v]);
    }
    ++compiles_;
    // Flat and without any cache: the search compiles graphs no call runs.
    CompileContext no_cache(nullptr);
    std::vector<Tensor> compiled = build_executable(r.graph, backend_, no_cache)->run(args);
    std::vector<Tensor> eager = codegen::eager::interpret(r.graph, host_args);
    for (size_t i = 0; i < compiled.size(); ++i) {
      const DType dtype = r.graph.meta(r.graph.outputs[i]).dtype;
      AccuracyOutput d = compare_values(compiled[i], eager[i], tolerance_for(check_, dtype, bf16_));
      if (d.passed) continue;
      // The diverging value the latest node defines is the likeliest culprit: prefer it.
      const bool better =
          !out.diverged || g_.values[r.outputs[i]].producer > g_.values[out.value].producer;
      if (better) out = Divergence{true, r.outputs[i], std::move(d)};
    }
    ZC_LOG(accuracy) << "bisect: the first " << k << " of " << g_.nodes.size() << " nodes "
                     << (out.diverged ? "diverge" : "match");
    return out;
  }

 private:
  ir::Graph g_;
  ir::RangeExtractor extract_;
  const codegen::Backend& backend_;
  const AccuracyCheck& check_;
  bool bf16_;
  std::vector<Tensor> env_;  // graph input values by value id
  // The same on the host: the interpreter runs the registry's CPU kernels, whatever device
  // the compiled code runs on.
  std::vector<Tensor> host_env_;
  int compiles_ = 0;
};

std::string region_path(const ir::Graph& g, ir::RegionId r) {
  std::vector<std::string> names;
  for (; r != ir::kNoRegion; r = g.regions[r].parent) names.push_back(g.regions[r].type_name);
  std::string s;
  for (auto it = names.rbegin(); it != names.rend(); ++it) s += (s.empty() ? "" : "/") + *it;
  return s;
}

// Where node `n` ended up in the graph's flat schedule on `backend`.
void locate_kernel(const ir::Graph& g, int32_t n, const codegen::Backend& backend,
                   AccuracyCulprit& c) {
  codegen::CodegenResult cg = codegen::codegen(g, backend, /*emit_source=*/false);
  const std::vector<codegen::Kernel>& kernels = cg.schedule.kernels;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const codegen::Kernel& K = kernels[k];
    if (K.anchor != n && std::find(K.nodes.begin(), K.nodes.end(), n) == K.nodes.end()) continue;
    c.kernel = static_cast<int64_t>(k);
    c.kernel_kind = codegen::kernel_kind_name(K.kind);
    for (int32_t m : K.nodes) c.kernel_ops.emplace_back(ops::op_def(g.nodes[m].op).name);
    if (K.nodes.empty() && K.anchor >= 0) {
      c.kernel_ops.emplace_back(ops::op_def(g.nodes[K.anchor].op).name);
    }
    return;
  }
  c.kernel_kind = "view";  // an alias of another value: no kernel computes it
}

}  // namespace

BisectResult bisect_divergence(const ir::Graph& captured, std::span<const Tensor> inputs,
                               const codegen::Backend& backend, const AccuracyCheck& check,
                               bool bf16_products) {
  BisectResult result;
  if (backend.interprets()) {
    result.note = "backend \"" + std::string(backend.name()) + "\" generates no kernels";
    return result;
  }
  ensure_support(backend);
  lower::LowerContext ctx;
  ctx.keep = backend.native_ops();
  ctx.split_long_reductions = backend.splits_long_reductions();
  // Numbered as the compiled code's graph is (build_executable schedules canonical form).
  Search search(ir::read_canonical(ir::canonical_bytes(lower::lower(captured, ctx))), inputs,
                backend, check, bf16_products);
  const ir::Graph& g = search.graph();
  const auto n = static_cast<int32_t>(g.nodes.size());
  Divergence hi_d = n > 0 ? search.prefix(n) : Divergence{};
  if (!hi_d.diverged) {
    result.compiles = search.compiles();
    result.note =
        "the graph compiled flat, on its own, matches eager: the difference comes from how "
        "this call's code was made (its regions, a size template, the library products' "
        "choices), not from one kernel";
    return result;
  }
  int32_t lo = 0, hi = n;  // the first lo nodes match; the first hi diverge
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    Divergence d = search.prefix(mid);
    if (d.diverged) {
      hi = mid;
      hi_d = std::move(d);
    } else {
      lo = mid;
    }
  }
  result.compiles = search.compiles();
  result.found = true;
  AccuracyCulprit& c = result.culprit;
  const int32_t node = g.values[hi_d.value].producer;
  ZC_CHECK(node >= 0, "bisect: a diverging value that no node defines");
  const ir::Node& nd = g.nodes[node];
  c.node = node;
  c.op = ops::op_def(nd.op).name;
  c.shape = g.meta(hi_d.value).shape;
  c.dtype = g.meta(hi_d.value).dtype;
  c.region = region_path(g, nd.region);
  c.max_abs = hi_d.diff.max_abs;
  c.max_rel = hi_d.diff.max_rel;
  locate_kernel(g, node, backend, c);
  return result;
}

}  // namespace zc::runtime
