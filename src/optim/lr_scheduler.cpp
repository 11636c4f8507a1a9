#include <algorithm>
#include <cmath>
#include <numbers>

#include "zc/error.h"
#include "zc/optim.h"

namespace zc::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::apply() {
  optimizer_.set_lr(base_lr_ * factor(step_));
}

void LRScheduler::step() {
  ++step_;
  apply();
}

std::map<std::string, double> LRScheduler::state() const {
  return {{"step", static_cast<double>(step_)}, {"base_lr", base_lr_}};
}

void LRScheduler::load_state(const std::map<std::string, double>& state) {
  auto step = state.find("step");
  auto base = state.find("base_lr");
  if (step == state.end() || base == state.end() || !(step->second >= 0) || !(base->second >= 0)) {
    throw Error("zc::optim::LRScheduler::load_state: expected a step >= 0 and a base_lr >= 0");
  }
  step_ = static_cast<int64_t>(step->second);
  base_lr_ = base->second;
  apply();
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor)
    : LRScheduler(optimizer), f_(std::move(factor)) {
  if (!f_) throw Error("zc::optim::LambdaLR: the factor function is empty");
  apply();
}

WarmupCosine::WarmupCosine(Optimizer& optimizer, WarmupCosineOptions o)
    : LRScheduler(optimizer), options(o) {
  if (o.warmup_steps < 0 || o.total_steps < std::max<int64_t>(o.warmup_steps, 1) ||
      !(o.min_factor >= 0) || !(o.min_factor <= 1)) {
    throw Error(
        "zc::optim::WarmupCosine: expected 0 <= warmup_steps <= total_steps, total_steps >= 1 "
        "and "
        "min_factor in [0, 1], got warmup_steps " +
        std::to_string(o.warmup_steps) + ", total_steps " + std::to_string(o.total_steps) +
        ", min_factor " + std::to_string(o.min_factor));
  }
  apply();
}

double WarmupCosine::factor(int64_t step) const {
  const WarmupCosineOptions& o = options;
  if (step < o.warmup_steps) return static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  const int64_t span = o.total_steps - o.warmup_steps;
  const double p =
      span == 0 ? 1.0 : std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  return o.min_factor + (1.0 - o.min_factor) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

}  // namespace zc::optim
