#include <cmath>
#include <limits>
#include <string>

#include "zc/autograd.h"
#include "zc/error.h"
#include "zc/factories.h"
#include "zc/nn.h"
#include "zc/ops.h"

namespace zc::nn {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  if (!(max_norm >= 0) || !(norm_type > 0)) {
    throw Error("zc::nn::clip_grad_norm_: expected max_norm >= 0 and norm_type > 0, got " +
                std::to_string(max_norm) + " and " + std::to_string(norm_type));
  }
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;
    if (!grads.empty() && p.grad().device() != grads[0].device()) {
      throw Error("zc::nn::clip_grad_norm_: gradients on " + grads[0].device().str() + " and " +
                  p.grad().device().str() + "; clip each device's parameters on their own");
    }
    grads.push_back(p.grad());
  }
  if (grads.empty()) return scalar_tensor(0.0);
  const bool inf = std::isinf(norm_type);
  // Each gradient's part (its largest magnitude, or its sum of |g|^p) in f32, then the total.
  Tensor total;
  for (const Tensor& g : grads) {
    const Tensor a = abs(g.to(DType::f32));
    const Tensor part = inf ? amax(a) : sum(norm_type == 2.0 ? a * a : pow(a, norm_type));
    total = !total.defined() ? part : inf ? maximum(total, part) : total + part;
  }
  if (!inf) total = norm_type == 2.0 ? sqrt(total) : pow(total, 1.0 / norm_type);
  const Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  for (const Tensor& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;
    p.mutable_grad() = (p.grad() * coef).to(p.grad().dtype());
  }
  return total;
}

}  // namespace zc::nn
