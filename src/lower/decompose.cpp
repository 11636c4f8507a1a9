#include "lower/decompose.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "ir/tracing.h"
#include "lower/graph_builder.h"
#include "ops/dispatch.h"
#include "util/check.h"
#include "zc/autocast.h"

namespace zc::lower {

namespace {

// Records the ops a decomposition calls on traced tensors, decomposing composite ones in turn.
// Ops on untraced tensors compute eagerly (that is how a decomposition builds a constant).
class Recorder final : public ops::OpInterceptor {
 public:
  Recorder(GraphBuilder& out, std::span<const ops::OpId> keep) : out_(out), keep_(keep) {}

  bool kept(ops::OpId op) const { return std::find(keep_.begin(), keep_.end(), op) != keep_.end(); }

  // Emits op(inputs) into the builder's current node and returns the outputs' values.
  std::vector<ir::ValueId> emit(const ops::OpDef& op, std::vector<ir::ValueId> inputs,
                                const ops::Attrs& attrs) {
    // A kept op inside another's decomposition stays whole too.
    if (!op.decompose || kept(op.id)) return out_.add_node(op.id, attrs, std::move(inputs));
    std::vector<ops::TensorMeta> metas;
    std::vector<Tensor> args;
    for (ir::ValueId v : inputs) {
      metas.push_back(out_.meta(v));
      args.push_back(traced(v));
    }
    std::vector<ops::TensorMeta> expect = ops::infer_outputs(op, metas, attrs);
    std::vector<Tensor> results;
    {
      ops::InterceptorScope scope(this);
      results = op.decompose(args, attrs);
    }
    ZC_CHECK(results.size() == expect.size(),
             "the decomposition of " << op.name << " returned " << results.size() << " tensors");
    std::vector<ir::ValueId> outs;
    for (size_t i = 0; i < results.size(); ++i) {
      ir::ValueId v = value_of(results[i]);
      const ops::TensorMeta& got = out_.meta(v);
      ZC_CHECK(got.shape == expect[i].shape && got.dtype == expect[i].dtype && !got.wrapped_number,
               "the decomposition of "
                   << op.name << " gives " << dtype_name(got.dtype) << shape_str(got.shape)
                   << ", the op " << dtype_name(expect[i].dtype) << shape_str(expect[i].shape));
      outs.push_back(v);
    }
    return outs;
  }

  std::vector<Tensor> intercept(const ops::OpDef& op, std::span<const Tensor> inputs,
                                const ops::Attrs& attrs) override {
    std::vector<ir::ValueId> ids;
    for (const Tensor& t : inputs) ids.push_back(value_of(t));
    std::vector<Tensor> out;
    for (ir::ValueId v : emit(op, std::move(ids), attrs)) out.push_back(traced(v));
    return out;
  }
  // Decompositions are ops, not modules: they open no regions.
  void enter_region(std::string_view, const void*) override {}
  void exit_region() override {}

 private:
  ir::ValueId value_of(const Tensor& t) {
    if (t.is_traced()) return ir::value_id(t, this);
    auto embed = [&](Tensor data) { return out_.add_constant(std::move(data)); };
    // A lowered graph keeps the inputs it was given, so a large constant a decomposition
    // computes (a causal mask) is embedded too.
    auto large = [&](const Tensor& big) { return embed(ir::constant_data(big)); };
    return constants_.value_of(t, embed, large);
  }

  Tensor traced(ir::ValueId id) {
    return ir::value_tensor(out_.meta(id), this, id, "a decomposition");
  }

  GraphBuilder& out_;
  std::span<const ops::OpId> keep_;
  ir::ConstantTable constants_;
};

}  // namespace

ir::Graph decompose(const ir::Graph& g, std::span<const ops::OpId> keep) {
  // A pure function of the graph: the caller's autocast scope (zc/autocast.h) must not cast
  // inside decompositions (eagerly the op's own kernel runs, in its inputs' dtypes).
  AutocastGuard no_autocast;
  GraphBuilder b(g);
  Recorder recorder(b, keep);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    const ops::OpDef& def = ops::op_def(node.op);
    b.begin_node(static_cast<int32_t>(i));
    if (!def.decompose || recorder.kept(node.op)) {
      b.copy_node(node);
      continue;
    }
    std::vector<ir::ValueId> outs = recorder.emit(def, b.map(node.inputs), node.attrs);
    for (size_t o = 0; o < outs.size(); ++o) b.alias(node.outputs[o], outs[o]);
  }
  return std::move(b).finish();
}

}  // namespace zc::lower
