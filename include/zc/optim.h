// zc::optim: optimizers shaped like torch.optim / LibTorch's. An optimizer holds the
// parameters it updates (each must require a gradient) and its per-parameter state; step()
// updates every parameter that has a gradient, in place (the parameter keeps its memory, so
// compiled graphs and CUDA-graph replays that read it see the new values), and zero_grad()
// drops the gradients. save()/load() write and read the state and hyperparameters as a
// safetensors file, so that a restarted job resumes where it stopped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zc/tensor.h"

namespace zc::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  void zero_grad();  // drops the gradients (torch's set_to_none=True)

  // Raises zc::Error when the file cannot be written or read, holds another optimizer's state,
  // or state that does not fit these parameters (count, shapes); load() changes nothing then.
  void save(const std::string& path) const;
  void load(const std::string& path);

  const std::vector<Tensor>& parameters() const { return params_; }

 protected:
  // `kind` names the optimizer in errors and in the saved state ("SGD", "AdamW").
  Optimizer(std::vector<Tensor> params, std::string kind);

  // The state buffer `name` of parameter i, undefined until the optimizer creates it.
  Tensor& state(size_t i, const std::string& name) { return state_[i][name]; }
  // Hyperparameters by name, saved and restored with the state.
  virtual std::map<std::string, double> hyperparameters() const = 0;
  virtual void set_hyperparameters(const std::map<std::string, double>& values) = 0;
  // load() replaced every state tensor.
  virtual void state_replaced() {}
  // Parameter i's state as save() writes it: state(i, ...), unless the optimizer keeps some of
  // it in another form between steps (AdamW's flat moments).
  virtual std::map<std::string, Tensor> saved_state(size_t i) const { return state_[i]; }

 private:
  std::vector<Tensor> params_;
  std::vector<std::map<std::string, Tensor>> state_;
  std::string kind_;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;  // added to the gradient (L2), as torch.optim.SGD
  double dampening = 0.0;
  bool nesterov = false;
};

// Stochastic gradient descent with optional momentum, exactly torch.optim.SGD's update.
class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  void step() override;
  SGDOptions options;

 private:
  std::map<std::string, double> hyperparameters() const override;
  void set_hyperparameters(const std::map<std::string, double>& values) override;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p -= lr * weight_decay * p
  // The update of every parameter as one compiled kernel over all of them laid end to end
  // (traced once, compiled and cached like any graph; one call per step) instead of a dozen
  // eager ops per parameter, as torch's fused AdamW. A step is fused when every parameter has
  // a gradient and all share a dtype, a device and a step count; otherwise it runs eagerly.
  // The same arithmetic either way, with the per-step numbers rounded to the parameters'
  // dtype (for f16 and bf16 the eager step keeps them in f32).
  bool fused = false;
};

// Adam with decoupled weight decay, exactly torch.optim.AdamW's update (amsgrad off).
class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  ~AdamW() override;
  void step() override;
  AdamWOptions options;

 private:
  bool fused_step();  // false: the parameters cannot be fused (see AdamWOptions::fused)
  void state_replaced() override;
  std::map<std::string, Tensor> saved_state(size_t i) const override;
  void write_moment_views();  // each parameter's moments, views of the flat ones, into state()
  struct Fused;
  std::unique_ptr<Fused> fused_;
  bool distinct_params_ = true;  // no handle listed twice (a fused step needs that)

  std::map<std::string, double> hyperparameters() const override;
  void set_hyperparameters(const std::map<std::string, double>& values) override;
};

}  // namespace zc::optim
