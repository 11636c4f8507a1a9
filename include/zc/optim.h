// zc::optim: optimizers shaped like torch.optim / LibTorch's. An optimizer holds the
// parameters it updates (each must require a gradient) and its per-parameter state; step()
// updates every parameter that has a gradient, in place (the parameter keeps its memory, so
// compiled graphs and CUDA-graph replays that read it see the new values), and zero_grad()
// drops the gradients. save()/load() write and read the state and hyperparameters as a
// safetensors file, so that a restarted job resumes where it stopped.
#pragma once

#include <cstdint>
#include <functional>
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
  // The learning rate the next step() uses; a schedule (LRScheduler) sets it between steps.
  double lr() const;
  void set_lr(double lr);

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

// Learning-rate schedules, shaped like torch.optim.lr_scheduler: a schedule holds its optimizer's
// learning rate at construction as base_lr, sets lr = base_lr * factor(0) at once, and each
// step() (called after the optimizer's step) advances one step and sets base_lr * factor(step).
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  int64_t last_step() const { return step_; }  // steps taken
  double base_lr() const { return base_lr_; }
  double last_lr() const { return optimizer_.lr(); }
  // For resuming (save_training_state): the step count and base_lr, and setting them back,
  // which sets the optimizer's lr for that step.
  std::map<std::string, double> state() const;
  void load_state(const std::map<std::string, double>& state);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  virtual double factor(int64_t step) const = 0;
  void apply();  // lr = base_lr * factor(last_step); derived constructors call it

 private:
  Optimizer& optimizer_;
  double base_lr_;
  int64_t step_ = 0;
};

// factor(step) given by a function (torch's LambdaLR).
class LambdaLR final : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor);

 private:
  double factor(int64_t step) const override { return f_(step); }
  std::function<double(int64_t)> f_;
};

struct WarmupCosineOptions {
  int64_t warmup_steps = 0;  // factor rises linearly from 0 over these steps
  int64_t total_steps = 0;   // then falls along a half cosine until this step, and stays
  double min_factor = 0.0;   // where the cosine ends
};

// Linear warmup, then cosine decay (transformers' get_cosine_schedule_with_warmup, with a
// floor): factor(s) = s / warmup for s < warmup, else min + (1 - min) (1 + cos(pi p)) / 2 with
// p = (s - warmup) / (total - warmup), clamped to 1. A zc::Error for total_steps < warmup_steps
// or < 1, negative steps, or min_factor outside [0, 1].
class WarmupCosine final : public LRScheduler {
 public:
  WarmupCosine(Optimizer& optimizer, WarmupCosineOptions options);
  WarmupCosineOptions options;

 private:
  double factor(int64_t step) const override;
};

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // steps without an inf or NaN before the scale grows
};

// Loss scaling for f16 training (torch.amp.GradScaler's loop): f16's range loses small
// gradients to zero, so the loss is multiplied by a scale before backward() and the gradients
// divided by it before the step; a step whose gradients hold an inf or NaN is skipped and the
// scale backs off, and after growth_interval good steps it grows.
//
//   opt.zero_grad();
//   scaler.scale(loss).backward();
//   scaler.step(opt);   // unscales, then steps unless a gradient is not finite
//   scaler.update();
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});
  // loss * scale (f32).
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients of opt's parameters by the scale, once per step (step() does it
  // when this was not called: call it first to clip the true gradients). Returns whether every
  // gradient is finite.
  bool unscale_(Optimizer& opt);
  // opt.step() unless a gradient is inf or NaN; whether it stepped.
  bool step(Optimizer& opt);
  // The scale for the next step: backed off after a skipped step, grown after growth_interval
  // good ones.
  void update();
  double get_scale() const { return scale_; }

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
  bool unscaled_ = false, found_inf_ = false;
};

}  // namespace zc::optim
