#include "runtime/regions/compile.h"

#include <algorithm>
#include <future>
#include <map>

#include "codegen/hierarchical_executable.h"
#include "ir/canonical.h"
#include "runtime/driver/compile_graph.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::runtime {

std::shared_ptr<const Executable> plan_executable(
    const ir::Graph& g, const RegionPlan& plan,
    const std::function<std::shared_ptr<const Executable>(const GraphPart&)>& part_exec) {
  std::vector<codegen::PartCall> calls;
  for (const GraphPart& gp : plan.parts) {
    calls.push_back(codegen::PartCall{part_exec(gp), gp.sub.inputs, gp.sub.outputs});
  }
  return codegen::hierarchical_executable(g, std::move(calls));
}

std::shared_ptr<const Executable> compile_hierarchical(const ir::Graph& g, const Backend& backend,
                                                       CompileContext& ctx, const RegionRule& rule,
                                                       bool size_templates, ProductOptions products,
                                                       std::vector<Digest>* graphs) {
  Timer timer;
  RegionPlan plan = plan_regions(g, rule);
  ZC_LOG(timing) << "regions planned in " << timer.ms() << " ms: " << plan.parts.size()
                 << " parts of a " << g.nodes.size() << "-node graph";
  if (plan.outlined_calls == 0) {
    const Digest h = ir::graph_hash(g);
    if (graphs) *graphs = {h};
    return compile_graph(g, backend, ctx, h, size_templates, products);
  }
  // Distinct parts compile at the same time: each is its own process of the system compiler,
  // so a block and its glue take as long as the slower of the two, not their sum.
  std::map<Digest, std::shared_future<std::shared_ptr<const Executable>>> by_hash;
  int compiled = 0, reused = 0;
  std::vector<Digest> distinct;
  for (const GraphPart& gp : plan.parts) {
    if (std::find(distinct.begin(), distinct.end(), gp.hash) == distinct.end())
      distinct.push_back(gp.hash);
  }
  if (graphs) *graphs = distinct;
  prefetch_graph_entries(distinct, backend, ctx);
  for (const GraphPart& gp : plan.parts) {
    if (by_hash.count(gp.hash)) {
      ++reused;
      continue;
    }
    ++compiled;
    const ir::Graph* part_graph = &gp.sub.graph;
    const Digest hash = gp.hash;
    // The parts share the context: every future is waited for before it goes.
    by_hash[gp.hash] =
        std::async(std::launch::async, [part_graph, hash, &backend, &ctx, size_templates] {
          return compile_graph(*part_graph, backend, ctx, hash, size_templates);
        }).share();
  }
  // Tuned (or given bf16 products) after every part is built, one after another (each hits
  // its default entry).
  std::map<Digest, std::shared_ptr<const Executable>> tuned;
  if (products.any()) {
    for (const GraphPart& gp : plan.parts) {
      by_hash.at(gp.hash).get();  // rethrows a part's compile error
      if (!tuned.count(gp.hash)) {
        tuned[gp.hash] =
            compile_graph(gp.sub.graph, backend, ctx, gp.hash, size_templates, products);
      }
    }
  }
  auto exec = plan_executable(g, plan, [&](const GraphPart& gp) {
    return products.any() ? tuned.at(gp.hash) : by_hash.at(gp.hash).get();  // rethrows errors
  });
  ctx.count(stats::Counter::regions_found, plan.outlined_calls);
  ctx.count(stats::Counter::region_graphs, plan.distinct_blocks);
  ctx.count(stats::Counter::parts_compiled, compiled);
  ctx.count(stats::Counter::parts_reused, reused);
  ZC_LOG(regions) << plan.parts.size() << " parts: " << plan.outlined_calls << " calls of "
                  << plan.distinct_blocks << " repeated block(s), "
                  << plan.parts.size() - plan.outlined_calls << " glue; " << compiled
                  << " distinct graphs compiled, " << reused << " calls reuse them";
  for (const GraphPart& gp : plan.parts) {
    if (gp.outlined) {
      ZC_LOG(regions) << "  call " << gp.type_name << " nodes [" << gp.begin << ", " << gp.end
                      << ") graph " << hex(gp.hash).substr(0, 16);
    }
  }
  return exec;
}

}  // namespace zc::runtime
