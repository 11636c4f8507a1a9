// torch.optim.AdamW's update (amsgrad off), per parameter with its own step count t:
// p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#include <cmath>

#include "tensor/assign.h"
#include "zc/autograd.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/optim.h"

namespace zc::optim {

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
}

void AdamW::step() {
  NoGradGuard no_grad;
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
