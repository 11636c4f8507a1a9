#include "lower/autodiff.h"

#include <memory>
#include <string>

#include "ir/tracing.h"
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "util/check.h"
#include "zc/autocast.h"
#include "zc/ops.h"

namespace zc::lower {

namespace {

// Appends the ops that derivative rules call on traced tensors to the graph, in the current
// region, as they are (composite ops stay whole: lowering decomposes the joint graph later).
// Concrete tensors the rules create (zeros, masks) become constants.
class Recorder final : public ops::OpInterceptor {
 public:
  explicit Recorder(ir::Graph& g) : g_(g) {}

  Tensor traced(ir::ValueId id) {
    return ir::value_tensor(g_.meta(id), this, id, "a derivative rule");
  }

  ir::ValueId value_of(const Tensor& t) {
    if (t.is_traced()) return ir::value_id(t, this);
    // A broadcast view (rules make zeros as a scalar expanded to a shape) is embedded as its
    // one row and expanded in the graph: a [4, 127, 768] block of zeros would otherwise be a
    // constant of that size in the graph's bytes, hashed and copied on every start.
    Shape base = t.shape();
    bool broadcast = false;
    for (size_t d = 0; d < base.size(); ++d) {
      if (t.stride(static_cast<int64_t>(d)) == 0 && base[d] > 1) base[d] = 1, broadcast = true;
    }
    if (broadcast) {
      Tensor row = t;
      for (size_t d = 0; d < base.size(); ++d) {
        if (base[d] == 1) row = row.slice(static_cast<int64_t>(d), 0, 1);
      }
      return value_of(traced(value_of(row.contiguous())).expand(t.shape()));
    }
    auto embed = [&](Tensor data) {
      ir::ValueId v = g_.add_value(ops::meta_of(data));
      g_.constants.push_back(ir::Constant{v, std::move(data)});
      return v;
    };
    auto large = [&](const Tensor& big) { return embed(ir::constant_data(big)); };
    return constants_.value_of(t, embed, large);
  }

  std::vector<Tensor> intercept(const ops::OpDef& op, std::span<const Tensor> inputs,
                                const ops::Attrs& attrs) override {
    ir::Node n{op.id, attrs, {}, {}, region};
    std::vector<ops::TensorMeta> metas;
    for (const Tensor& t : inputs) {
      n.inputs.push_back(value_of(t));
      metas.push_back(g_.meta(n.inputs.back()));
    }
    const int32_t index = static_cast<int32_t>(g_.nodes.size());
    std::vector<Tensor> out;
    for (ops::TensorMeta& m : ops::infer_outputs(op, metas, attrs)) {
      n.outputs.push_back(g_.add_value(std::move(m), index));
      out.push_back(traced(n.outputs.back()));
    }
    g_.nodes.push_back(std::move(n));
    return out;
  }
  void enter_region(std::string_view, const void*) override {}
  void exit_region() override {}

  ir::RegionId region = ir::kNoRegion;  // of the nodes recorded next

 private:
  ir::Graph& g_;
  ir::ConstantTable constants_;
};

// The backward nodes of a forward region's nodes go in a mirror region ("grad(Layer)"), nested
// as the forward ones are: processed in reverse, a contiguous forward range gives a contiguous
// backward range, so regions stay valid, and a repeated block's backward is a repeated block
// too, which hierarchical compilation compiles once.
class MirrorRegions {
 public:
  explicit MirrorRegions(ir::Graph& g) : g_(g), mirror_(g.regions.size(), ir::kNoRegion) {}

  // The mirror of forward region `r`, created (with its parents) on first use.
  ir::RegionId of(ir::RegionId r) {
    if (r == ir::kNoRegion) return ir::kNoRegion;
    if (mirror_[r] != ir::kNoRegion) return mirror_[r];
    ir::RegionId parent = of(g_.regions[r].parent);
    ir::Region m{"grad(" + g_.regions[r].type_name + ")", parent, 0, 0};
    g_.regions.push_back(std::move(m));
    return mirror_[r] = static_cast<ir::RegionId>(g_.regions.size() - 1);
  }

  // Sets each mirror's node range from the nodes placed in it and its descendants.
  void finish(size_t first_node) { g_.fit_region_ranges(first_node); }

 private:
  ir::Graph& g_;
  std::vector<ir::RegionId> mirror_;  // per forward region
};

}  // namespace

std::vector<bool> tracked_values(const ir::Graph& captured, std::span<const size_t> wrt) {
  std::vector<bool> tracked(captured.values.size(), false);
  for (size_t i : wrt) {
    ZC_CHECK(i < captured.inputs.size(), "autodiff: input " << i << " does not exist");
    ir::ValueId v = captured.inputs[i].value;
    ZC_CHECK(is_floating(captured.meta(v).dtype), "autodiff: input " << i << " is not floating");
    tracked[v] = true;
  }
  for (const ir::Node& n : captured.nodes) {
    bool any = false;
    for (ir::ValueId v : n.inputs) any = any || tracked[v];
    any = any && !ops::op_def(n.op).stops_gradient;
    for (ir::ValueId v : n.outputs) tracked[v] = any && is_floating(captured.meta(v).dtype);
  }
  return tracked;
}

JointGraph joint_graph(const ir::Graph& captured, std::span<const size_t> wrt) {
  // Derivatives trace in their forward ops' dtypes, as eager backward() computes them: the
  // caller's autocast scope (zc/autocast.h) is off here.
  AutocastGuard no_autocast;
  ir::Graph g = captured;
  const size_t forward_nodes = g.nodes.size();

  // Which values depend on a `wrt` input (only they need gradients).
  const std::vector<bool> tracked = tracked_values(captured, wrt);

  // The gradient of each output comes in as an input of g.
  std::vector<ir::ValueId> output_grads;
  for (ir::ValueId out : captured.outputs) {
    ops::TensorMeta m = g.meta(out);
    m.wrapped_number = false;
    output_grads.push_back(g.add_value(m));
    g.inputs.push_back(ir::Input{output_grads.back(), ir::InputKind::user});
  }

  // The gradient of each value, as a value of g (-1: none yet, i.e. zero).
  std::vector<ir::ValueId> grad(g.values.size(), -1);
  Recorder recorder(g);
  MirrorRegions mirrors(g);
  ops::InterceptorScope scope(&recorder);
  auto add_grad = [&](ir::ValueId to, const Tensor& contribution) {
    ir::ValueId c = recorder.value_of(contribution);
    grad.resize(g.values.size(), -1);
    grad[to] = grad[to] < 0 ? c : recorder.value_of(recorder.traced(grad[to]) + contribution);
  };
  // A value returned twice (or an input returned) gets the sum of its outputs' gradients.
  for (size_t k = 0; k < captured.outputs.size(); ++k) {
    if (tracked[captured.outputs[k]])
      add_grad(captured.outputs[k], recorder.traced(output_grads[k]));
  }
  for (size_t i = forward_nodes; i-- > 0;) {
    // Copied: recording appends to g.nodes.
    const ir::Node node = g.nodes[i];
    std::vector<Tensor> grads;
    bool any = false;
    for (ir::ValueId v : node.outputs) {
      grads.push_back(grad[v] >= 0 ? recorder.traced(grad[v]) : Tensor());
      any = any || grad[v] >= 0;
    }
    uint64_t wanted = 0;
    for (size_t k = 0; k < node.inputs.size() && k < 64; ++k) {
      if (tracked[node.inputs[k]]) wanted |= uint64_t{1} << k;
    }
    if (!any || wanted == 0) continue;
    const ops::OpDef& def = ops::op_def(node.op);
    recorder.region = mirrors.of(node.region);
    if (!def.derivative) {
      throw Error("compiled backward: op '" + std::string(def.name) +
                  "' has no derivative rule, and a gradient must pass through it");
    }
    std::vector<Tensor> inputs, outputs;
    for (ir::ValueId v : node.inputs) inputs.push_back(recorder.traced(v));
    for (ir::ValueId v : node.outputs) outputs.push_back(recorder.traced(v));
    std::vector<Tensor> results =
        def.derivative(ops::VjpArgs{inputs, outputs, node.attrs, grads, wanted});
    ZC_CHECK(results.size() == node.inputs.size(),
             "the derivative of " << def.name << " gave " << results.size() << " gradients");
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      ir::ValueId in = node.inputs[k];
      if (!tracked[in] || !results[k].defined()) continue;
      const ops::TensorMeta meta = g.meta(in);  // a copy: recording a cast grows g.values
      add_grad(in, ops::input_gradient(def.name, k, results[k], meta));
    }
  }

  mirrors.finish(forward_nodes);

  JointGraph out;
  for (size_t i : wrt) {
    ir::ValueId v = grad[g.inputs[i].value];
    out.has_grad.push_back(v >= 0);
    if (v >= 0) g.outputs.push_back(v);
  }
  out.graph = std::move(g);
  return out;
}

}  // namespace zc::lower
