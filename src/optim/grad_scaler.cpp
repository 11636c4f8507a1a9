#include <cmath>
#include <string>

#include "zc/error.h"
#include "zc/ops.h"
#include "zc/optim.h"

namespace zc::optim {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  if (!(options.init_scale > 0) || !(options.growth_factor > 1) ||
      !(options.backoff_factor > 0 && options.backoff_factor < 1) || options.growth_interval < 1) {
    throw Error(
        "GradScaler: expected init_scale > 0, growth_factor > 1, backoff_factor in "
        "(0, 1) and growth_interval >= 1, got " +
        std::to_string(options.init_scale) + ", " + std::to_string(options.growth_factor) + ", " +
        std::to_string(options.backoff_factor) + ", " + std::to_string(options.growth_interval));
  }
}

Tensor GradScaler::scale(const Tensor& loss) const {
  return cast(loss, DType::f32) * scale_;
}

bool GradScaler::unscale_(Optimizer& opt) {
  if (unscaled_) return !found_inf_;
  unscaled_ = true;
  found_inf_ = false;
  const double inverse = 1.0 / scale_;
  // One sum of every gradient's absolute values: inf or NaN when any element is (one read
  // of a number per parameter, not one per element).
  Tensor total;
  for (const Tensor& p : opt.parameters()) {
    Tensor& g = p.mutable_grad();
    if (!g.defined()) continue;
    g = g * inverse;
    const Tensor s = sum(abs(cast(g, DType::f32)));
    total = total.defined() ? total + s.to(total.device()) : s;
  }
  if (total.defined()) found_inf_ = !std::isfinite(total.item<double>());
  return !found_inf_;
}

bool GradScaler::step(Optimizer& opt) {
  const bool finite = unscale_(opt);
  if (finite) opt.step();
  return finite;
}

void GradScaler::update() {
  if (!unscaled_) return;  // no step since the last update
  if (found_inf_) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
  } else if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
  unscaled_ = false;
  found_inf_ = false;
}

}  // namespace zc::optim
