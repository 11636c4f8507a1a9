#include "capture/tracer.h"

#include <algorithm>

#include "autograd/node.h"
#include "tensor/random.h"
#include "util/check.h"
#include "zc/autograd.h"
#include "zc/factories.h"

namespace zc::capture {

struct Tracer::Slot final : TraceSlot {
  Tracer* tracer = nullptr;
  int segment = 0;
  ir::ValueId id = -1;  // -1: a marked parameter not yet used in this segment
  ir::InputKind kind = ir::InputKind::carried;
  size_t user = 0;     // kind user: which forward() argument
  size_t binding = 0;  // kind parameter: its binding in this segment, once it is an input
  Tensor real;         // the concrete value, once known
  void force(TensorImpl& self) override { tracer->force(self); }
};

namespace {
// An untraced handle on the storage of a (possibly traced) tensor.
Tensor untraced_view(const TensorImpl& impl) {
  return Tensor::view_of(impl.storage, impl.shape, impl.strides, impl.offset, impl.dtype);
}
}  // namespace

Tracer::Tracer(SegmentRunner runner, bool fullgraph)
    : runner_(std::move(runner)), fullgraph_(fullgraph), call_grad_(GradMode::is_enabled()) {
  GradMode::set_enabled(true);
}

Tracer::~Tracer() {
  for (auto& impl : marked_) impl->trace.reset();
  GradMode::set_enabled(call_grad_);
}

Tensor Tracer::add_user_input(const Tensor& real) {
  const size_t user = user_reals_.size();
  user_reals_.push_back(real);
  ops::TensorMeta meta = ops::meta_of(real);
  ir::ValueId id = graph_.add_value(meta);
  graph_.inputs.push_back(ir::Input{id, ir::InputKind::user});
  bindings_.push_back(InputBinding{ir::InputKind::user, Tensor(), user});
  produced_.resize(graph_.values.size());
  auto slot = std::make_shared<Slot>();
  slot->tracer = this;
  slot->segment = segment_;
  slot->id = id;
  slot->kind = ir::InputKind::user;
  slot->user = user;
  slot->real = real;
  // The input's own strides, which its guard pins: forward() may look at its layout.
  return ir::traced_tensor(meta, real.strides(), std::move(slot));
}

void Tracer::mark_parameter(const Tensor& param) {
  TensorImpl* impl = param.unsafe_impl();
  if (impl->trace) return;  // shared by two modules: marked already
  auto slot = std::make_shared<Slot>();
  slot->tracer = this;
  slot->segment = segment_;
  slot->kind = ir::InputKind::parameter;
  impl->trace = slot;
  marked_.push_back(param.impl_ptr());
}

ir::ValueId Tracer::value_of(const Tensor& t) {
  if (t.is_traced()) {
    auto* slot = dynamic_cast<Slot*>(t.unsafe_impl()->trace.get());
    if (!slot || slot->tracer != this) {
      throw Error(
          "capture: a tensor traced by another capture was used here (did a traced "
          "tensor escape an earlier forward()?)");
    }
    if (slot->segment == segment_ && slot->id >= 0) return slot->id;
    // First use in this segment: the value comes in as an input, with the metadata its traced
    // tensor carries (wrapped_number included, so it promotes here as it did before).
    ir::ValueId id = graph_.add_value(ops::meta_of(t));
    ir::InputKind kind = slot->kind == ir::InputKind::parameter ? ir::InputKind::parameter
                         : slot->kind == ir::InputKind::user    ? ir::InputKind::user
                                                                : ir::InputKind::carried;
    graph_.inputs.push_back(ir::Input{id, kind});
    Tensor binding;
    if (kind == ir::InputKind::parameter) {
      binding = Tensor(t.impl_ptr());
    } else if (kind == ir::InputKind::carried) {
      ZC_CHECK(slot->real.defined(), "carried value without a concrete value");
      binding = slot->real;
    }
    bindings_.push_back(InputBinding{kind, binding, slot->user});
    slot->binding = bindings_.size() - 1;
    slot->segment = segment_;
    slot->id = id;
    produced_.resize(graph_.values.size());
    return id;
  }
  auto embed = [&](Tensor data) {
    ir::ValueId id = graph_.add_value(ops::meta_of(data));
    graph_.constants.push_back(ir::Constant{id, std::move(data)});
    return id;
  };
  auto lift = [&](const Tensor& large) {
    ir::ValueId id = graph_.add_value(ops::meta_of(large));
    graph_.inputs.push_back(ir::Input{id, ir::InputKind::lifted});
    bindings_.push_back(InputBinding{ir::InputKind::lifted, large});
    return id;
  };
  // A tensor that wants gradients (a member forward() reads that is no registered parameter) is
  // lifted at any size, never embedded: the compiled backward sends it its gradient, as eager
  // autograd does.
  const bool wants_grad = autograd::requires_grad(t);
  // A broadcast (a view with stride 0 in a dim of size above 1: zeros or a buffer expanded to
  // the batch, as ONNX's ConstantOfShape and Expand of a constant make) comes in as its base
  // and an expand node. The graph then holds the broadcast, whose sizes vary with the inputs'
  // as a reshape's do, not a constant of this call's sizes: a model that makes one traces alike
  // at every batch size, and one compile serves them all.
  if (!wants_grad && constants_.find(t) < 0) {
    Tensor base = t;
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (t.size(d) > 1 && t.stride(d) == 0) base = base.slice(d, 0, 1);
    }
    if (base.numel() < t.numel()) {
      read_.push_back(t.impl_ptr());
      const Tensor wide =
          intercept(ops::op_def(ops::OpId::expand), {&base, 1}, ops::ShapeAttrs{t.shape()})[0];
      return value_of(wide);
    }
  }
  // A new tensor that wants no gradients is noted (constants_read) as the table takes it in:
  // the callbacks run only for tensors it has not met.
  auto noted = [&] {
    if (!wants_grad) read_.push_back(t.impl_ptr());
  };
  ir::ValueId id = constants_.value_of(
      t,
      [&](Tensor data) {
        noted();
        return wants_grad ? lift(t) : embed(std::move(data));
      },
      [&](const Tensor& large) {
        noted();
        return lift(large);
      });
  produced_.resize(graph_.values.size());
  return id;
}

Tensor Tracer::make_traced(ir::ValueId id) {
  auto slot = std::make_shared<Slot>();
  slot->tracer = this;
  slot->segment = segment_;
  slot->id = id;
  Tensor t = ir::traced_tensor(graph_.meta(id), std::move(slot));
  produced_.resize(graph_.values.size());
  produced_[id] = t.impl_ptr();
  return t;
}

std::vector<Tensor> Tracer::intercept(const ops::OpDef& op, std::span<const Tensor> inputs,
                                      const ops::Attrs& attrs) {
  ir::Node node;
  node.op = op.id;
  node.attrs = attrs;
  std::vector<ops::TensorMeta> metas;
  for (const Tensor& t : inputs) {
    ir::ValueId id = value_of(t);
    node.inputs.push_back(id);
    metas.push_back(graph_.meta(id));
  }
  // The shape rule validates now, so a bad call fails at the line that made it.
  std::vector<ops::TensorMeta> outs = ops::infer_outputs(op, metas, attrs);
  node.region = open_regions_.empty() ? ir::kNoRegion : open_regions_.back();
  int32_t index = static_cast<int32_t>(graph_.nodes.size());
  std::vector<Tensor> result;
  for (auto& m : outs) {
    ir::ValueId id = graph_.add_value(std::move(m), index);
    node.outputs.push_back(id);
  }
  graph_.nodes.push_back(std::move(node));
  for (ir::ValueId id : graph_.nodes.back().outputs) result.push_back(make_traced(id));
  // Under a NoGradGuard inside forward() eager gives these outputs no grad_fn; a detach after
  // each (recorded as any op is) says so in the graph, or compiled training would send
  // gradients through them.
  if (!GradMode::is_enabled() && !op.stops_gradient) {
    for (Tensor& t : result) {
      if (is_floating(t.dtype()))
        t = intercept(ops::op_def(ops::OpId::detach), {&t, 1}, ops::NoAttrs{})[0];
    }
  }
  return result;
}

void Tracer::draw_random(std::string_view factory) {
  throw Error("capture: forward() calls zc::" + std::string(factory) +
              ", and a compiled graph would reuse this call's random numbers on every later call; "
              "draw them with zc::rand_like(x) or randn_like(x) (uniform in [0, 1) or standard "
              "normal, of x's shape), which a compiled call draws anew each time, or run the "
              "module uncompiled");
}

bool Tracer::untraced_on_host(const ops::OpDef&, std::span<const Tensor> inputs,
                              std::span<const ops::TensorMeta> outputs) const {
  int64_t read = 0, made = 0;
  for (const Tensor& t : inputs) read += t.device().is_cpu() ? 0 : t.numel();
  for (const ops::TensorMeta& m : outputs) made += shape_numel(m.shape);
  return read <= kHostFoldElements && made <= kHostFoldElements;
}

void Tracer::update_in_place(const Tensor& self, const Tensor& updated) {
  auto* slot = dynamic_cast<Slot*>(self.unsafe_impl()->trace.get());
  ZC_CHECK(slot && slot->tracer == this, "an in-place update of a tensor of another trace");
  if (slot->kind == ir::InputKind::user) {
    throw Error(
        "capture: forward() updates its input tensor in place (index_copy_); a compiled "
        "graph updates only the module's registered buffers: keep the state in a "
        "buffer (register_buffer) or return the updated tensor");
  }
  if (breaks_ > 0) {
    throw Error(
        "capture: forward() updates a buffer in place (index_copy_) after a graph break; "
        "in-place updates need a whole graph: remove the break (ZC_LOGS=graph shows "
        "where it is)");
  }
  if (call_grad_ && autograd::requires_grad(updated)) {
    throw Error(
        "capture: forward() updates a buffer in place (index_copy_) with a value that "
        "wants gradients; compiled training of in-place updates is not supported: call "
        "it under zc::NoGradGuard, or uncompiled");
  }
  const ir::ValueId value = value_of(updated);
  if (slot->kind == ir::InputKind::parameter) {
    value_of(self);  // an input of this segment (it is, when the update read it)
    auto it = std::find_if(updated_.begin(), updated_.end(),
                           [&](const auto& u) { return u.first == slot->binding; });
    if (it == updated_.end()) {
      updated_.emplace_back(slot->binding, value);
    } else {
      it->second = value;
    }
  }
  // Later reads of `self` in forward() see the update (a value it computed is rebound alike).
  slot->id = value;
  slot->segment = segment_;
  produced_.resize(graph_.values.size());
  produced_[value] = self.impl_ptr();
}

Tensor Tracer::random_like(ops::OpId op, const Tensor& x) {
  // The seed lives where x does: generated code reads it as an element of device memory. A
  // trace draws nothing (traces for other sizes run beside calls, and would move the process
  // generator at times of their own); the value is drawn when a graph-break segment runs.
  Tensor seed = zeros({}, DType::i64, x.device());
  const ir::ValueId id = graph_.add_value(ops::meta_of(seed));
  graph_.inputs.push_back(ir::Input{id, ir::InputKind::seed});
  bindings_.push_back(InputBinding{ir::InputKind::seed, seed});
  Tensor traced_seed = make_traced(id);
  const std::vector<Tensor> args{x, traced_seed};
  return intercept(ops::op_def(op), args, ops::NoAttrs{})[0];
}

void Tracer::enter_region(std::string_view type_name, const void*) {
  ir::Region r;
  r.type_name = std::string(type_name);
  r.parent = open_regions_.empty() ? ir::kNoRegion : open_regions_.back();
  r.begin = r.end = static_cast<int32_t>(graph_.nodes.size());
  graph_.regions.push_back(std::move(r));
  open_regions_.push_back(static_cast<ir::RegionId>(graph_.regions.size() - 1));
}

void Tracer::exit_region() {
  ZC_CHECK(!open_regions_.empty(), "region exit without entry");
  graph_.regions[open_regions_.back()].end = static_cast<int32_t>(graph_.nodes.size());
  open_regions_.pop_back();
}

void Tracer::force(TensorImpl& self) {
  if (!updated_.empty()) {
    throw Error(
        "capture: forward() updated a buffer in place (index_copy_) and then needs the "
        "concrete value of a tensor (a graph break); in-place updates need a whole graph: "
        "remove the data-dependent code");
  }
  auto* slot = static_cast<Slot*>(self.trace.get());
  if (slot->kind == ir::InputKind::user && slot->real.defined()) {
    if (fullgraph_) {
      throw Error(
          "fullgraph=true: forward() reads the values of its input tensor (item() or "
          "data()), which needs a graph break; compile with fullgraph=false to allow it");
    }
    // Reading the input itself needs no computation, but the trace now depends on values.
    ++breaks_;
    self.storage = slot->real.impl_ptr()->storage;
    self.offset = slot->real.storage_offset();
    self.strides = slot->real.strides();
    return;
  }
  int32_t producer =
      slot->segment == segment_ && slot->id >= 0 ? graph_.values[slot->id].producer : -1;
  std::string op_name =
      producer >= 0 ? std::string(ops::op_def(graph_.nodes[producer].op).name) : "an earlier op";
  if (fullgraph_) {
    throw Error("fullgraph=true: forward() needs the concrete value of a tensor computed by '" +
                op_name + "' (item() or data() on a traced tensor), which is a graph break; " +
                "remove the data-dependent code or compile with fullgraph=false");
  }
  ++breaks_;
  // Every value a live tensor still refers to leaves this segment as an output.
  std::vector<std::shared_ptr<TensorImpl>> live;
  graph_.outputs.clear();
  for (size_t id = 0; id < produced_.size(); ++id) {
    if (auto impl = produced_[id].lock()) {
      graph_.outputs.push_back(static_cast<ir::ValueId>(id));
      live.push_back(std::move(impl));
    }
  }
  std::vector<Tensor> inputs;
  for (const InputBinding& b : bindings_) {
    if (b.kind == ir::InputKind::user) {
      inputs.push_back(user_reals_[b.user]);
    } else if (b.kind == ir::InputKind::parameter) {
      inputs.push_back(untraced_view(*b.tensor.unsafe_impl()));
    } else if (b.kind == ir::InputKind::seed) {
      int64_t drawn = 0;  // this segment runs now: its rand_likes draw as eager ones do
      random_seeds(&drawn, 1);
      inputs.push_back(from_values<int64_t>({drawn}, {}).to(b.tensor.device()));
    } else {
      inputs.push_back(b.tensor);
    }
  }
  // The segment runs eagerly with the call's grad mode (the trace runs with gradients on, so
  // that a NoGradGuard inside forward() shows), and off inside such a guard.
  struct CallGradMode {
    bool inside = GradMode::is_enabled();
    explicit CallGradMode(bool call) { GradMode::set_enabled(call && inside); }
    ~CallGradMode() { GradMode::set_enabled(inside); }
  } mode(call_grad_);
  std::vector<Tensor> results = runner_(graph_, inputs);
  ZC_CHECK(results.size() == live.size(), "segment returned the wrong number of outputs");
  for (size_t i = 0; i < live.size(); ++i) {
    TensorImpl& impl = *live[i];
    const Tensor& r = results[i];
    impl.storage = r.impl_ptr()->storage;
    impl.offset = r.storage_offset();
    impl.strides = r.strides();
    static_cast<Slot*>(impl.trace.get())->real = r;
  }
  start_segment();
}

void Tracer::start_segment() {
  ++segment_;
  std::vector<std::string> reopen;
  for (ir::RegionId r : open_regions_) reopen.push_back(graph_.regions[r].type_name);
  graph_ = ir::Graph{};
  bindings_.clear();
  produced_.clear();
  constants_.clear();
  open_regions_.clear();
  for (const std::string& name : reopen) enter_region(name, nullptr);
}

ir::Graph Tracer::finish(const Tensor& result) {
  if (!result.defined()) throw Error("capture: forward() returned an undefined Tensor");
  return finish(std::span<const Tensor>(&result, 1));
}

ir::Graph Tracer::finish(std::span<const Tensor> results) {
  graph_.outputs.clear();
  for (const Tensor& r : results) {
    ZC_CHECK(r.defined(), "a traced function returned an undefined Tensor");
    graph_.outputs.push_back(value_of(r));
  }
  writes_.clear();
  for (const auto& [binding, value] : updated_) {
    writes_.push_back(BufferWrite{binding, graph_.outputs.size()});
    graph_.outputs.push_back(value);
  }
  while (!open_regions_.empty()) exit_region();
  return std::move(graph_);
}

}  // namespace zc::capture
