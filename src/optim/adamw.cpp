// torch.optim.AdamW's update (amsgrad off), per parameter with its own step count t:
// p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "codegen/call_buffers.h"
#include "runtime/call/compiled_function.h"
#include "tensor/assign.h"
#include "util/hash.h"
#include "zc/autograd.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/optim.h"

namespace zc::optim {

// The fused update: every parameter's values, gradient and moments laid end to end in flat
// tensors, and one compiled graph over them (a dozen elementwise ops, so one kernel): inputs
// P, G, M, V, then lr / (1 - b1^t), sqrt(1 - b2^t) and 1 - lr wd as 0-dim tensors (the same
// graph every step); outputs P, M, V. The arithmetic is the eager step's, in the same order.
//
// Layout. Parameter i lives at `offset[i]` of every flat tensor, which holds `span` elements.
// When the gradients come from one compiled call on a GPU, they are adjacent blocks of one
// allocation (Storage::allocate_together), and the layout is theirs: G is then a view over
// them, with no copy, and the gaps between blocks (alignment, another output) are computed on
// and never read. Otherwise the layout is dense and G is a concatenation. The parameters are
// moved once into a flat tensor `packed` of that layout (each parameter's handle now shows its
// part; replace_contents), so that P is a view too and the new values go back in one copy. A
// parameter that no longer shows its part (a reloaded model) is packed again.
//
// The moments live in the flat M and V, which each step replaces rather than copying the new
// ones back (twice their bytes a step). Each parameter's state tensors are views of them,
// written only when something reads them (save(), an eager step): a view per parameter and
// moment, every step, would cost a small model's CPU step a fifth of its time. The flat
// tensors are rebuilt from the per-parameter state whenever that changed behind them (an eager
// step, load()) or the layout changed.
struct AdamW::Fused {
  double beta1, beta2, eps;
  runtime::CompiledFunction update;
  Tensor m, v;                  // flat moments; undefined until built
  double step = 0;              // every parameter's step count while the flat moments are in use
  std::vector<int64_t> offset;  // where each parameter starts in the flat tensors
  int64_t span = 0;             // elements of each flat tensor
  Tensor packed;                // the flat parameters; undefined until packed
  bool views_current = true;    // state()'s moments are views of m and v

  // Parameter i's part of flat tensor `t`, in the parameter's shape.
  Tensor part(const Tensor& t, size_t i, const Tensor& param) const {
    return t.slice(0, offset[i], offset[i] + param.numel()).view(param.shape());
  }

  Fused(double b1, double b2, double e)
      : beta1(b1),
        beta2(b2),
        eps(e),
        update([this](std::span<const Tensor> in) { return compute(in); }, name(b1, b2, e)) {}

  // A fused update for `params`, preparing the layouts the last process recorded for the same
  // parameters (compiled_function.h): on a GPU, loading the update's binary at the first step
  // would wait for the backward queued before it.
  static std::unique_ptr<Fused> make(double b1, double b2, double e,
                                     const std::vector<Tensor>& params) {
    auto f = std::make_unique<Fused>(b1, b2, e);
    std::string context;
    for (const Tensor& p : params) {
      context += p.device().str() + " " + std::string(dtype_name(p.dtype()));
      for (int64_t d : p.shape()) context += " " + std::to_string(d);
      context += ";";
    }
    f->update.prepare(hex(sha256(context)));
    return f;
  }

  // What the update computes: the constants its trace holds.
  static std::string name(double b1, double b2, double e) {
    char text[128];
    std::snprintf(text, sizeof text, "optim.AdamW.update betas %.17g %.17g eps %.17g", b1, b2, e);
    return text;
  }

  std::vector<Tensor> compute(std::span<const Tensor> in) const {
    const Tensor &p = in[0], &g = in[1], &m0 = in[2], &v0 = in[3];
    const Tensor &step_size = in[4], &sqrt_bias2 = in[5], &decay = in[6];
    Tensor m2 = m0 * beta1 + g * (1.0 - beta1);
    Tensor v2 = v0 * beta2 + g * g * (1.0 - beta2);
    Tensor denom = sqrt(v2) / sqrt_bias2 + eps;
    return {p * decay - m2 / denom * step_size, m2, v2};
  }
};

AdamW::~AdamW() = default;

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), "AdamW"), options(options) {
  const auto [b1, b2] = options.betas;
  if (!(options.lr >= 0) || !(options.eps >= 0) || !(options.weight_decay >= 0) ||
      !(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1)) {
    throw Error("AdamW: expected lr, eps, weight_decay >= 0 and betas in [0, 1), got lr " +
                std::to_string(options.lr) + ", betas (" + std::to_string(b1) + ", " +
                std::to_string(b2) + "), eps " + std::to_string(options.eps) + ", weight_decay " +
                std::to_string(options.weight_decay));
  }
  std::set<const TensorImpl*> distinct;
  for (const Tensor& p : parameters()) distinct.insert(p.unsafe_impl());
  distinct_params_ = distinct.size() == parameters().size();
  if (options.fused) fused_ = Fused::make(b1, b2, options.eps, parameters());
}

namespace {

Tensor flat(const std::vector<Tensor>& parts) {
  std::vector<Tensor> rows;
  rows.reserve(parts.size());
  for (const Tensor& t : parts) rows.push_back(t.reshape({-1}));
  return cat(rows, 0);
}

uintptr_t address_of(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(codegen::data_address(t));
}

// Where each of `parts` starts, in elements from the first: when all are dense blocks of one
// allocation made together (see Fused), none overlapping, spanning at most twice their
// elements; with `span`, the elements from the first start to the last end, and `view`, the flat
// view over them. nullopt otherwise.
struct Placement {
  std::vector<int64_t> offset;
  int64_t span = 0;
  Tensor view;
};
std::optional<Placement> placement_of(const std::vector<Tensor>& parts) {
  const Tensor& first = parts[0];
  const TensorImpl& f = *first.unsafe_impl();
  if (!f.storage || f.storage->group() == 0) return std::nullopt;
  const size_t esize = dtype_size(first.dtype());
  uintptr_t base = UINTPTR_MAX;
  int64_t total = 0;
  for (const Tensor& t : parts) {
    const TensorImpl& impl = *t.unsafe_impl();
    if (!impl.storage || impl.storage->group() != f.storage->group() || !t.is_contiguous() ||
        t.dtype() != first.dtype()) {
      return std::nullopt;
    }
    base = std::min(base, address_of(t));
    total += t.numel();
  }
  Placement p;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [start, end) in elements
  for (const Tensor& t : parts) {
    const uintptr_t at = address_of(t) - base;
    if (at % esize != 0) return std::nullopt;
    p.offset.push_back(static_cast<int64_t>(at / esize));
    ranges.emplace_back(p.offset.back(), p.offset.back() + t.numel());
    p.span = std::max(p.span, ranges.back().second);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return std::nullopt;
  }
  if (p.span > 2 * total) return std::nullopt;
  // The blocks stay allocated while `parts` live, which the step keeps for as long as the view.
  p.view = Tensor::view_of(Storage::borrow(reinterpret_cast<void*>(base),
                                           static_cast<size_t>(p.span) * esize, first.device()),
                           {p.span}, {1}, 0, first.dtype());
  return p;
}

// Whether every parameter shows its part of `packed` (see Fused).
bool packed_in_place(const std::vector<Tensor>& params, const Tensor& packed,
                     const std::vector<int64_t>& offset) {
  if (!packed.defined()) return false;
  const uintptr_t base = address_of(packed);
  const size_t esize = dtype_size(packed.dtype());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    if (p.device() != packed.device() || p.dtype() != packed.dtype() || !p.is_contiguous() ||
        address_of(p) != base + static_cast<uintptr_t>(offset[i]) * esize) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool AdamW::fused_step() {
  const std::vector<Tensor>& params = parameters();
  const DType dtype = params[0].dtype();
  const Device device = params[0].device();
  // One handle listed twice could not show two parts of the flat parameters.
  if (!distinct_params_) return false;
  for (const Tensor& p : params) {
    if (!p.grad().defined() || p.dtype() != dtype || p.device() != device) return false;
  }
  const auto [b1, b2] = options.betas;
  if (fused_ && (fused_->beta1 != b1 || fused_->beta2 != b2 || fused_->eps != options.eps)) {
    fused_.reset();
  }
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  int64_t total = 0;
  for (const Tensor& p : params) {
    grads.push_back(p.grad());
    total += p.numel();
  }
  // The layout: the gradients' own when they allow a view, else dense.
  std::optional<Placement> placed = placement_of(grads);
  std::vector<int64_t> offset;
  int64_t span = total;
  if (placed) {
    offset = placed->offset;
    span = placed->span;
  } else {
    int64_t at = 0;
    for (const Tensor& p : params) {
      offset.push_back(at);
      at += p.numel();
    }
  }
  if (fused_ && fused_->m.defined() && (fused_->offset != offset || fused_->span != span)) {
    // A new layout: the moments go back to the per-parameter state and are laid out again.
    write_moment_views();
    fused_->m = fused_->v = Tensor();
  }
  if (!fused_ || !fused_->m.defined()) {
    // (Re)build the flat moments from the per-parameter state; one step count for all.
    double t = -1;
    bool any_state = false;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& step = state(i, "step");
      const double ti = step.defined() ? step.item<double>() : 0.0;
      if (t >= 0 && ti != t) return false;
      t = ti;
      any_state = any_state || state(i, "exp_avg").defined() || state(i, "exp_avg_sq").defined();
    }
    // Zeros made in place on the device; loaded or earlier state is copied into its parts.
    auto moments = [&](const char* name) {
      Tensor flat_moment = zeros({span}, dtype, device);
      if (!any_state) return flat_moment;
      for (size_t i = 0; i < params.size(); ++i) {
        const Tensor& s = state(i, name);
        if (!s.defined()) continue;
        assign_values(
            flat_moment.slice(0, offset[i], offset[i] + params[i].numel()).view(params[i].shape()),
            s.to(device).to(dtype).contiguous());
      }
      return flat_moment;
    };
    if (!fused_) fused_ = Fused::make(b1, b2, options.eps, params);
    fused_->m = moments("exp_avg");
    fused_->v = moments("exp_avg_sq");
    fused_->step = t;
    fused_->offset = offset;
    fused_->span = span;
    fused_->views_current = false;  // written when read (save(), an eager step)
  }
  Fused& f = *fused_;
  if (!packed_in_place(params, f.packed, f.offset)) {
    // The parameters move into the flat tensor once (and after being replaced): each handle
    // shows its part from now on, with the same values.
    f.packed = zeros({f.span}, dtype, device);
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor part = f.part(f.packed, i, params[i]);
      assign_values(part, params[i].contiguous());
      replace_contents(params[i], part);
    }
  }
  const double t = f.step + 1;
  auto number = [&](double value) { return scalar_tensor(value, dtype).to(device); };
  std::vector<Tensor> in{f.packed,
                         placed ? placed->view : flat(grads),
                         f.m,
                         f.v,
                         number(options.lr / (1.0 - std::pow(b1, t))),
                         number(std::sqrt(1.0 - std::pow(b2, t))),
                         number(1.0 - options.lr * options.weight_decay)};
  std::vector<Tensor> out = f.update(in);
  // The new moments replace the old ones (see Fused). The parameters are written in place, in
  // one copy: the model and its recorded CUDA graphs hold their storage.
  f.m = out[1];
  f.v = out[2];
  f.views_current = false;
  f.step = t;
  assign_values(f.packed, out[0]);
  // The write went through a view of their memory: each parameter's own storage says it
  // changed (autograd's checks, and what an executable converted from it, read its version).
  for (const Tensor& p : params) p.unsafe_impl()->storage->bump_version();
  const Tensor step = scalar_tensor(t, DType::f64);
  for (size_t i = 0; i < params.size(); ++i) state(i, "step") = step;
  return true;
}

void AdamW::step() {
  NoGradGuard no_grad;
  if (options.fused && fused_step()) return;
  // The eager update replaces the state tensors: flat moments no longer back them.
  if (fused_ && fused_->m.defined()) write_moment_views();
  if (fused_) fused_->m = fused_->v = Tensor();
  const AdamWOptions& o = options;
  const auto [b1, b2] = o.betas;
  for (size_t i = 0; i < parameters().size(); ++i) {
    const Tensor& p = parameters()[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    Tensor& step = state(i, "step");
    Tensor& m = state(i, "exp_avg");
    Tensor& v = state(i, "exp_avg_sq");
    const double t = (step.defined() ? step.item<double>() : 0.0) + 1;
    step = scalar_tensor(t, DType::f64);
    m = m.defined() ? m * b1 + g * (1.0 - b1) : g * (1.0 - b1);
    v = v.defined() ? v * b2 + g * g * (1.0 - b2) : g * g * (1.0 - b2);
    const double bias1 = 1.0 - std::pow(b1, t), bias2 = 1.0 - std::pow(b2, t);
    Tensor decayed = o.weight_decay != 0 ? p * (1.0 - o.lr * o.weight_decay) : p;
    Tensor denom = sqrt(v) / std::sqrt(bias2) + o.eps;
    assign_values(p, (decayed - m / denom * (o.lr / bias1)).to(p.dtype()));
  }
}

void AdamW::write_moment_views() {
  Fused& f = *fused_;
  if (f.views_current) return;
  const std::vector<Tensor>& params = parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    state(i, "exp_avg") = f.part(f.m, i, params[i]);
    state(i, "exp_avg_sq") = f.part(f.v, i, params[i]);
  }
  f.views_current = true;
}

std::map<std::string, Tensor> AdamW::saved_state(size_t i) const {
  std::map<std::string, Tensor> out = Optimizer::saved_state(i);
  if (fused_ && fused_->m.defined() && !fused_->views_current) {
    const Tensor& p = parameters()[i];
    out["exp_avg"] = fused_->part(fused_->m, i, p);
    out["exp_avg_sq"] = fused_->part(fused_->v, i, p);
  }
  return out;
}

void AdamW::state_replaced() {
  if (fused_) fused_->m = fused_->v = Tensor();
}

std::map<std::string, double> AdamW::hyperparameters() const {
  return {{"lr", options.lr},
          {"beta1", options.betas.first},
          {"beta2", options.betas.second},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay}};
}

void AdamW::set_hyperparameters(const std::map<std::string, double>& v) {
  AdamWOptions o = options;
  if (auto it = v.find("lr"); it != v.end()) o.lr = it->second;
  if (auto it = v.find("beta1"); it != v.end()) o.betas.first = it->second;
  if (auto it = v.find("beta2"); it != v.end()) o.betas.second = it->second;
  if (auto it = v.find("eps"); it != v.end()) o.eps = it->second;
  if (auto it = v.find("weight_decay"); it != v.end()) o.weight_decay = it->second;
  options = o;
}

}  // namespace zc::optim
