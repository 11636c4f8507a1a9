#include "lower/fold_constants.h"

#include "lower/graph_builder.h"
#include "util/check.h"

namespace zc::lower {

ir::Graph fold_constants(const ir::Graph& g) {
  GraphBuilder b(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    b.begin_node(static_cast<int32_t>(i));
    std::vector<Tensor> args;
    for (ir::ValueId v : node.inputs) {
      const Tensor* data = b.constant(b.map(v));
      if (!data) break;
      args.push_back(*data);
    }
    std::vector<ops::TensorMeta> outs;
    int64_t elements = 0;
    for (ir::ValueId v : node.outputs) {
      outs.push_back(g.meta(v));
      elements += shape_numel(outs.back().shape);
    }
    if (args.size() != node.inputs.size() || elements > kMaxFoldedElements) {
      b.copy_node(node);
      continue;
    }
    std::vector<Tensor> results = ops::op_def(node.op).eager(args, node.attrs, outs);
    ZC_CHECK(results.size() == outs.size(), "eager kernel returned the wrong number of outputs");
    for (size_t o = 0; o < outs.size(); ++o) {
      // A kernel may return a view of its input; a constant owns its data.
      Tensor data = results[o].clone();
      ZC_CHECK(data.shape() == outs[o].shape && data.dtype() == outs[o].dtype,
               "eager kernel of " << ops::op_def(node.op).name << " disagrees with its shape rule");
      b.alias(node.outputs[o], b.add_constant(std::move(data)));
    }
  }
  return std::move(b).finish();
}

}  // namespace zc::lower
