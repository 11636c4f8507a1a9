#include "lower/channels_last.h"

#include <algorithm>
#include <map>

#include "lower/graph_builder.h"
#include "ops/registry.h"

namespace zc::lower {

namespace {

const std::vector<int64_t> kToNhwc{0, 2, 3, 1}, kToNchw{0, 3, 1, 2};

// Which convolutions the pass takes: channels-last, f32 ones on the CPU (oneDNN's); in place,
// every one (cuDNN's, which run every float type). A conv2d that already has an epilogue is
// left as it is.
bool converts(const ir::Graph& g, const ir::Node& n, bool channels_last) {
  if (n.op != ops::OpId::conv2d) return false;
  const auto& a = std::get<ops::Conv2dAttrs>(n.attrs);
  if (a.residual || a.relu || a.relu6) return false;
  return std::all_of(n.inputs.begin(), n.inputs.end(), [&](ir::ValueId v) {
    const ops::TensorMeta& m = g.meta(v);
    return channels_last ? m.dtype == DType::f32 && m.device.is_cpu() : is_floating(m.dtype);
  });
}

// Whether n is a ReLU as the registry defines one, the one activation a convolution library
// applies in its own call.
bool epilogue_relu(const ir::Node& n) {
  return ops::epilogue_act(n.op, n.attrs) == ops::EpilogueAct::relu;
}

// Whether n is a ReLU6, min(max(x, 0), 6) as one clamp (ONNX's Clip, torch's hardtanh(0, 6)):
// oneDNN's convolution applies it as a post-op (eltwise_clip); cuDNN's fused convolution here
// takes ReLU only.
bool epilogue_relu6(const ir::Node& n) {
  if (n.op != ops::OpId::clamp) return false;
  const auto& c = std::get<ops::ClampAttrs>(n.attrs);
  return c.min && *c.min == 0.0 && c.max && *c.max == 6.0;
}

class Pass {
 public:
  Pass(const ir::Graph& g, bool channels_last)
      : g_(g), b_(g), channels_last_(channels_last), nhwc_(g.values.size(), -1) {}

  ir::Graph run() && {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      for (ir::ValueId v : g_.nodes[i].inputs) {
        ++uses_[v];
        reader_[v] = static_cast<int32_t>(i);
        if (converts(g_, g_.nodes[i], channels_last_) && v == g_.nodes[i].inputs[0])
          read_by_conv_[v] = true;
      }
    }
    for (ir::ValueId v : g_.outputs) ++uses_[v];
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const ir::Node& n = g_.nodes[i];
      b_.begin_node(static_cast<int32_t>(i));
      if (converts(g_, n, channels_last_)) {
        Pending p{std::get<ops::Conv2dAttrs>(n.attrs), {as_nhwc(n.inputs[0])}};
        for (size_t k = 1; k < n.inputs.size(); ++k) p.inputs.push_back(as_nchw(n.inputs[k]));
        pending_.emplace(n.outputs[0], std::move(p));
        emit_unless_joined(n.outputs[0]);
      } else if (fuses(n)) {
        emit_unless_joined(n.outputs[0]);
      } else if (channels_last_max_pool(n)) {
        auto a = std::get<ops::Pool2dAttrs>(n.attrs);
        a.channels_last = true;
        nhwc_[n.outputs[0]] = b_.add_node(n.op, a, {as_nhwc(n.inputs[0])})[0];
      } else if (channels_last_elementwise(n)) {
        std::vector<ir::ValueId> in;
        for (ir::ValueId v : n.inputs) in.push_back(operand_nhwc(v));
        nhwc_[n.outputs[0]] = b_.add_node(n.op, n.attrs, std::move(in))[0];
      } else {
        for (ir::ValueId v : n.inputs) as_nchw(v);
        b_.copy_node(n);
        // What a convolution reads is made channels-last here, in this node's region (a pool's
        // result, at the end of the stem), not in the reader's (a block's first convolution),
        // so that the first of the repeated blocks is like the others.
        for (ir::ValueId v : n.outputs) {
          if (channels_last_ && rank(v) == 4 && read_by_conv_[v]) as_nhwc(v);
        }
      }
    }
    for (ir::ValueId v : g_.outputs) as_nchw(v);
    return std::move(b_).finish();
  }

 private:
  int64_t rank(ir::ValueId v) const { return static_cast<int64_t>(g_.meta(v).shape.size()); }

  // An elementwise op is computed channels-last when its result has rank 4 and one of its
  // rank-4 operands already is. Not one whose values follow its elements' indices (rand_like):
  // permuted, it would draw other numbers than where the forward's graph drew them.
  bool channels_last_elementwise(const ir::Node& n) const {
    if (!channels_last_ || !ops::is_elementwise(n.op) || n.outputs.size() != 1 ||
        ops::op_def(n.op).reads_element_index || rank(n.outputs[0]) != 4)
      return false;
    return std::any_of(n.inputs.begin(), n.inputs.end(), [&](ir::ValueId v) {
      return rank(v) == 4 && (nhwc_[v] >= 0 || pending_.count(v));
    });
  }

  // A max pool of a channels-last f32 value (a ResNet's stem) pools it as it lies.
  bool channels_last_max_pool(const ir::Node& n) const {
    if (!channels_last_ || n.op != ops::OpId::max_pool2d ||
        std::get<ops::Pool2dAttrs>(n.attrs).channels_last)
      return false;
    const ir::ValueId x = n.inputs[0];
    return g_.meta(x).dtype == DType::f32 && rank(x) == 4 &&
           (nhwc_[x] >= 0 || pending_.count(x) != 0);
  }

  // A convolution not yet emitted: what reads its output alone may still join its epilogue.
  struct Pending {
    ops::Conv2dAttrs attrs;
    std::vector<ir::ValueId> inputs;  // output values: x (channels-last), w, bias, residual
  };

  // Node n joins the epilogue of the pending convolution it reads, which nothing else reads:
  // a ReLU, or an add of another rank-4 value of the same shape (a residual) before any ReLU.
  bool fuses(const ir::Node& n) {
    if (n.inputs.empty() || n.outputs.size() != 1) return false;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      auto it = pending_.find(n.inputs[k]);
      if (it == pending_.end() || uses_[n.inputs[k]] != 1) continue;
      Pending p = it->second;
      const bool activated = p.attrs.relu || p.attrs.relu6;
      if (epilogue_relu(n) && !activated) {
        p.attrs.relu = true;
      } else if (channels_last_ && epilogue_relu6(n) && !activated) {
        p.attrs.relu6 = true;
      } else if (n.op == ops::OpId::add && n.inputs.size() == 2 && !p.attrs.residual &&
                 !activated) {
        const ir::ValueId other = n.inputs[1 - k];
        const ops::TensorMeta &m = g_.meta(other), &y = g_.meta(n.inputs[k]);
        if (other == n.inputs[k] || m.shape != g_.meta(n.outputs[0]).shape || m.dtype != y.dtype ||
            g_.meta(n.outputs[0]).dtype != y.dtype) {
          return false;
        }
        p.inputs.push_back(as_nhwc(other));
        p.attrs.residual = true;
      } else {
        return false;
      }
      pending_.erase(it);
      pending_.emplace(n.outputs[0], std::move(p));
      return true;
    }
    return false;
  }

  // A pending convolution stays pending only while its one reader may join its epilogue, so
  // that it is emitted where it was (or at that reader), never in a later block's region.
  void emit_unless_joined(ir::ValueId v) {
    const Pending& p = pending_.at(v);
    bool may_join = false;
    if (uses_[v] == 1 && reader_[v] >= 0) {
      const ir::Node& r = g_.nodes[reader_[v]];
      const bool activated = p.attrs.relu || p.attrs.relu6;
      may_join = ((epilogue_relu(r) || (channels_last_ && epilogue_relu6(r))) && !activated) ||
                 (r.op == ops::OpId::add && !p.attrs.residual && !activated);
    }
    if (!may_join) emit_pending(v);
  }

  // Emits the pending convolution that computes old value v.
  void emit_pending(ir::ValueId v) {
    auto it = pending_.find(v);
    if (it == pending_.end()) return;
    Pending p = std::move(it->second);
    pending_.erase(it);
    if (!channels_last_) {
      b_.alias(v, b_.add_node(ops::OpId::conv2d, p.attrs, std::move(p.inputs))[0]);
      return;
    }
    nhwc_[v] = b_.add_node(ops::OpId::conv2d_nhwc, p.attrs, std::move(p.inputs))[0];
  }

  // Old value v in [N, C, H, W], made from its channels-last form on first use.
  ir::ValueId as_nchw(ir::ValueId v) {
    emit_pending(v);
    if (b_.mapped(v)) return b_.map(v);
    ir::ValueId p = b_.add_node(ops::OpId::permute, ops::PermuteAttrs{kToNchw}, {nhwc_[v]})[0];
    b_.alias(v, p);
    return p;
  }

  // Old rank-4 value v in the layout the pass gives convolutions: channels-last, or as it is.
  ir::ValueId as_nhwc(ir::ValueId v) {
    if (!channels_last_) return as_nchw(v);
    emit_pending(v);
    if (nhwc_[v] < 0) {
      nhwc_[v] = b_.add_node(ops::OpId::permute, ops::PermuteAttrs{kToNhwc}, {as_nchw(v)})[0];
    }
    return nhwc_[v];
  }

  // An operand of a channels-last elementwise op: broadcasting aligns shapes from the right,
  // so a lower-rank operand is first given the leading dims of size 1 it stands for.
  ir::ValueId operand_nhwc(ir::ValueId v) {
    const int64_t r = rank(v);
    if (r == 4) return as_nhwc(v);
    ir::ValueId x = as_nchw(v);
    if (r == 0) return x;
    Shape four(4 - r, 1);
    const Shape& s = g_.meta(v).shape;
    four.insert(four.end(), s.begin(), s.end());
    x = b_.add_node(ops::OpId::reshape, ops::ShapeAttrs{four}, {x})[0];
    return b_.add_node(ops::OpId::permute, ops::PermuteAttrs{kToNhwc}, {x})[0];
  }

  const ir::Graph& g_;
  GraphBuilder b_;
  const bool channels_last_;       // else conv_epilogues(): the epilogues alone
  std::vector<ir::ValueId> nhwc_;  // old value -> its channels-last form, -1 if none yet
  std::vector<int32_t> uses_ = std::vector<int32_t>(g_.values.size(), 0);     // reads + outputs
  std::vector<int32_t> reader_ = std::vector<int32_t>(g_.values.size(), -1);  // a reading node
  std::vector<bool> read_by_conv_ = std::vector<bool>(g_.values.size(), false);
  std::map<ir::ValueId, Pending> pending_;  // by the old value it computes
};

ir::Graph run_pass(const ir::Graph& g, bool channels_last) {
  if (std::none_of(g.nodes.begin(), g.nodes.end(),
                   [&](const ir::Node& n) { return converts(g, n, channels_last); })) {
    return g;
  }
  return Pass(g, channels_last).run();
}

}  // namespace

ir::Graph channels_last(const ir::Graph& g) {
  return run_pass(g, true);
}

ir::Graph conv_epilogues(const ir::Graph& g) {
  return run_pass(g, false);
}

}  // namespace zc::lower
