#include "zc/factories.h"
#include "zc/optim.h"
#include "zc/serialize.h"

namespace zc::optim {

namespace {

// Saved names: "<kind>.params" (how many), "<kind>.hyper.<name>", "<kind>.state.<i>.<name>".
std::string params_key(const std::string& kind) {
  return kind + ".params";
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, std::string kind)
    : params_(std::move(params)), state_(params_.size()), kind_(std::move(kind)) {
  if (params_.empty()) throw Error(kind_ + ": got an empty parameter list");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    std::string which = kind_ + ": parameter " + std::to_string(i);
    if (!p.defined()) throw Error(which + " is an undefined Tensor");
    if (!p.requires_grad()) {
      throw Error(which + " " + shape_str(p.shape()) +
                  " does not require a gradient, so it would never be updated; call "
                  "requires_grad_() on it or leave it out");
    }
    if (!p.is_leaf()) {
      throw Error(which + " was produced by op '" + p.grad_fn_name() +
                  "'; an optimizer updates leaves (parameters), not computed tensors");
    }
  }
}

double Optimizer::lr() const {
  return hyperparameters().at("lr");
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0)) throw Error(kind_ + ": expected a learning rate >= 0, got " + std::to_string(lr));
  set_hyperparameters({{"lr", lr}});
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.mutable_grad() = Tensor();
}

void Optimizer::save(const std::string& path) const {
  std::map<std::string, Tensor> out;
  out[params_key(kind_)] = scalar_tensor(static_cast<double>(params_.size()), DType::i64);
  for (const auto& [name, value] : hyperparameters()) {
    out[kind_ + ".hyper." + name] = scalar_tensor(value, DType::f64);
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    for (const auto& [name, value] : saved_state(i)) {
      if (value.defined()) {
        out[kind_ + ".state." + std::to_string(i) + "." + name] =
            value.to(Device::cpu()).contiguous();
      }
    }
  }
  write_safetensors(out, path);
}

void Optimizer::load(const std::string& path) {
  std::map<std::string, Tensor> in = read_safetensors(path);
  const std::string who = kind_ + ".load(" + path + ")";
  auto count = in.find(params_key(kind_));
  if (count == in.end()) {
    std::string first = in.empty() ? "nothing" : "'" + in.begin()->first + "'";
    throw Error(who + ": the file holds no " + kind_ + " state (its first tensor is " + first +
                ")");
  }
  if (count->second.item<int64_t>() != static_cast<int64_t>(params_.size())) {
    throw Error(who + ": the state is for " + std::to_string(count->second.item<int64_t>()) +
                " parameters, this optimizer has " + std::to_string(params_.size()));
  }
  std::map<std::string, double> hyper;
  std::vector<std::map<std::string, Tensor>> state(params_.size());
  const std::string hyper_prefix = kind_ + ".hyper.", state_prefix = kind_ + ".state.";
  for (const auto& [key, value] : in) {
    if (key.rfind(hyper_prefix, 0) == 0) {
      hyper[key.substr(hyper_prefix.size())] = value.item<double>();
    } else if (key.rfind(state_prefix, 0) == 0) {
      std::string rest = key.substr(state_prefix.size());
      size_t dot = rest.find('.');
      size_t i = params_.size();
      if (dot != std::string::npos && dot > 0 && rest.find_first_not_of("0123456789") == dot &&
          dot < 10) {
        i = std::stoul(rest.substr(0, dot));
      }
      if (i >= params_.size()) throw Error(who + ": malformed state name '" + key + "'");
      const Tensor& p = params_[i];
      std::string name = rest.substr(dot + 1);
      bool scalar = value.dim() == 0;
      if (!scalar && value.shape() != p.shape()) {
        throw Error(who + ": state '" + key + "' has shape " + shape_str(value.shape()) +
                    " but parameter " + std::to_string(i) + " has shape " + shape_str(p.shape()));
      }
      state[i][name] = scalar ? value : value.to(p.dtype()).to(p.device());
    } else if (key != params_key(kind_)) {
      throw Error(who + ": unexpected tensor '" + key + "' in an optimizer state file");
    }
  }
  set_hyperparameters(hyper);
  state_ = std::move(state);
  state_replaced();
}

}  // namespace zc::optim
