#include "lower/split_reductions.h"

#include "lower/graph_builder.h"

namespace zc::lower {

namespace {

// How many of the innermost reduced dims the first stage takes; 0 when the sum stays whole.
size_t inner_dims(const Shape& in, const Shape& out, const ops::ReduceAttrs& a) {
  if (a.dims.size() < 2 || shape_numel(out) > kSplitMaxResults) return 0;
  int64_t reduced = 1;
  for (int64_t d : a.dims) reduced *= in[d];
  if (reduced < kSplitMinElements) return 0;
  int64_t row = 1;
  for (size_t k = 1; k < a.dims.size(); ++k) {
    row *= in[a.dims[a.dims.size() - k]];
    if (row >= kSplitMinRow) return k;
  }
  return 0;
}

}  // namespace

ir::Graph split_reductions(const ir::Graph& g) {
  GraphBuilder b(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    b.begin_node(static_cast<int32_t>(i));
    const size_t inner =
        node.op == ops::OpId::sum
            ? inner_dims(g.meta(node.inputs[0]).shape, g.meta(node.outputs[0]).shape,
                         std::get<ops::ReduceAttrs>(node.attrs))
            : 0;
    if (inner == 0) {
      b.copy_node(node);
      continue;
    }
    const auto& a = std::get<ops::ReduceAttrs>(node.attrs);
    ops::ReduceAttrs first{.dims = {a.dims.end() - static_cast<ptrdiff_t>(inner), a.dims.end()},
                           .keepdim = true};
    const ir::ValueId partial = b.add_node(ops::OpId::sum, first, {b.map(node.inputs[0])})[0];
    // Over the partial sums, the same dims as the original (the inner ones are size 1 now),
    // so the result has the original's shape.
    const ir::ValueId total = b.add_node(ops::OpId::sum, a, {partial})[0];
    b.alias(node.outputs[0], total);
  }
  return std::move(b).finish();
}

}  // namespace zc::lower
