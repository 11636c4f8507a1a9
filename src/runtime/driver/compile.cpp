#include "runtime/driver/compile.h"

#include "ir/canonical.h"
#include "runtime/regions/compile.h"

namespace zc::runtime {

Compiled compile(const CompileRequest& request, CompileContext& ctx) {
  // A part of the caller's context, so that this request's report is its own even when the
  // caller's context gathers several (a training step's forward and backward).
  CompileContext own(CompileContext::PartOf{}, ctx);
  Compiled out;
  if (request.hierarchical) {
    out.exec = compile_hierarchical(request.graph, request.backend, own, RegionRule{},
                                    request.size_templates, request.products, &out.graphs);
  } else {
    const Digest h = request.hash ? *request.hash : ir::graph_hash(request.graph);
    out.graphs = {h};
    out.exec = compile_graph(request.graph, request.backend, own, h, request.size_templates,
                             request.products);
  }
  if (request.replay) out.exec = request.backend.replayable(std::move(out.exec), request.per_call);
  out.report = own.report();
  ctx.merge(out.report);
  return out;
}

}  // namespace zc::runtime
