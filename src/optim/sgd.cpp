// torch.optim.SGD's update: g += weight_decay p; with momentum, buf = momentum buf +
// (1 - dampening) g (buf = g on the first step) and g = buf (or g + momentum buf, Nesterov);
// p -= lr g.
#include "tensor/assign.h"
#include "zc/autograd.h"
#include "zc/ops.h"
#include "zc/optim.h"

namespace zc::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), "SGD"), options(options) {
  if (!(options.lr >= 0) || !(options.momentum >= 0) || !(options.weight_decay >= 0)) {
    throw Error("SGD: lr, momentum and weight_decay must be >= 0");
  }
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    throw Error("SGD: Nesterov momentum needs momentum > 0 and dampening 0");
  }
}

void SGD::step() {
  NoGradGuard no_grad;
  const SGDOptions& o = options;
  for (size_t i = 0; i < parameters().size(); ++i) {
    const Tensor& p = parameters()[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    if (o.momentum != 0) {
      Tensor& buf = state(i, "momentum_buffer");
      buf = buf.defined() ? buf * o.momentum + g * (1.0 - o.dampening) : g.clone();
      g = o.nesterov ? g + buf * o.momentum : buf;
    }
    assign_values(p, (p - g * o.lr).to(p.dtype()));
  }
}

std::map<std::string, double> SGD::hyperparameters() const {
  return {{"lr", options.lr},
          {"momentum", options.momentum},
          {"weight_decay", options.weight_decay},
          {"dampening", options.dampening},
          {"nesterov", options.nesterov ? 1.0 : 0.0}};
}

void SGD::set_hyperparameters(const std::map<std::string, double>& v) {
  SGDOptions o = options;
  if (auto it = v.find("lr"); it != v.end()) o.lr = it->second;
  if (auto it = v.find("momentum"); it != v.end()) o.momentum = it->second;
  if (auto it = v.find("weight_decay"); it != v.end()) o.weight_decay = it->second;
  if (auto it = v.find("dampening"); it != v.end()) o.dampening = it->second;
  if (auto it = v.find("nesterov"); it != v.end()) o.nesterov = it->second != 0;
  options = o;
}

}  // namespace zc::optim
