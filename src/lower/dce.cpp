#include "lower/dce.h"

#include "lower/graph_builder.h"

namespace zc::lower {

ir::Graph eliminate_dead_code(const ir::Graph& g) {
  std::vector<bool> live(g.values.size(), false);
  for (ir::ValueId v : g.outputs) live[v] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const ir::Node& node = g.nodes[i];
    for (ir::ValueId v : node.outputs) keep[i] = keep[i] || live[v];
    if (!keep[i]) continue;
    for (ir::ValueId v : node.inputs) live[v] = true;
  }
  GraphBuilder b(g, /*copy_constants=*/false);
  for (const ir::Constant& c : g.constants) {
    if (live[c.value]) b.copy_constant(c);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!keep[i]) continue;
    b.begin_node(static_cast<int32_t>(i));
    b.copy_node(g.nodes[i]);
  }
  return std::move(b).finish();
}

}  // namespace zc::lower
