#include "lower/pipeline.h"

#include <algorithm>
#include <string_view>

#include "ir/canonical.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/canonicalize.h"
#include "lower/channels_last.h"
#include "lower/decompose.h"
#include "lower/split_reductions.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::lower {

namespace {

struct Pass {
  std::string_view name;
  ir::Graph (*run)(const ir::Graph&, const LowerContext&);
};

// The lowering passes, in order.
constexpr Pass kPasses[] = {
    // convolutions and what surrounds them channels-last (where the backend keeps conv2d_nhwc),
    // or their epilogues fused in place (where it keeps conv2d)
    {"channels_last",
     [](const ir::Graph& g, const LowerContext& c) {
       auto kept = [&](ops::OpId op) {
         return std::find(c.keep.begin(), c.keep.end(), op) != c.keep.end();
       };
       if (kept(ops::OpId::conv2d_nhwc)) return channels_last(g);
       return kept(ops::OpId::conv2d) ? conv_epilogues(g) : g;
     }},
    // composite ops become primitive ones (but those the backend keeps)
    {"decompose", [](const ir::Graph& g, const LowerContext& c) { return decompose(g, c.keep); }},
    // a GPU's long sums into two stages (only where the backend asks)
    {"split_reductions",
     [](const ir::Graph& g, const LowerContext& c) {
       return c.split_long_reductions ? split_reductions(g) : g;
     }},
    // identities, small constant work, duplicates, dead code go
    {"canonicalize", [](const ir::Graph& g, const LowerContext&) { return canonicalize(g); }},
};

void verify_after(const ir::Graph& g, std::string_view pass) {
  try {
    ir::verify(g);
  } catch (const Error& e) {
    ZC_CHECK(false, "lowering pass " << pass << " produced an invalid graph: " << e.what());
  }
}

}  // namespace

ir::Graph lower(const ir::Graph& captured, const LowerContext& ctx) {
  if (ctx.verify) ir::verify(captured);
  ir::Graph g;
  const ir::Graph* cur = &captured;
  for (const Pass& pass : kPasses) {
    Timer timer;
    ir::Graph next = pass.run(*cur, ctx);
    ZC_LOG(timing) << "lower " << pass.name << ": " << timer.ms() << " ms";
    if (ctx.verify) verify_after(next, pass.name);
    if (logging::enabled(logging::Topic::graph) &&
        ir::canonical_bytes(next) != ir::canonical_bytes(*cur)) {
      ZC_LOG(graph) << "after " << pass.name << ":\n" << ir::print(next);
    }
    g = std::move(next);
    cur = &g;
  }
  for (const ir::Node& n : g.nodes) {
    ZC_CHECK(!ops::op_def(n.op).decompose ||
                 std::find(ctx.keep.begin(), ctx.keep.end(), n.op) != ctx.keep.end(),
             "lowering left the composite op " << ops::op_def(n.op).name << " in the graph");
  }
  return g;
}

}  // namespace zc::lower
