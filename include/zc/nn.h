// zc::nn: modules in the style of torch.nn. A module owns named parameters, buffers and
// submodules; calling it (operator()) runs forward() inside a region that the capture stage
// records with the module's type name, which is how a repeated block is found.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zc/dynamic_dim.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace zc::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  virtual ~Module() = default;

  // A module overrides one of the two forwards. The one-tensor forward's default runs the
  // many-input forward on {x} and wants one result back; the many-input forward's default runs
  // the one-tensor forward on its single input. A module overriding neither raises zc::Error
  // when called.
  virtual Tensor forward(const Tensor& x);
  virtual std::vector<Tensor> forward(const std::vector<Tensor>& inputs);
  // Run forward() as one region (see above).
  Tensor operator()(const Tensor& x);
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  // The demangled C++ type name ("Layer", "zc::nn::Linear"); the region name in graphs.
  virtual std::string type_name() const;
  // The dims of forward()'s inputs that vary from call to call by the module's own account
  // (an ONNX file's symbolic batch and sequence dims): compile() makes them dynamic from the
  // first call as CompileOptions::dynamic_dims does, unless its options are Dynamic::Static or
  // mark that dim themselves. None by default.
  virtual std::vector<DynamicDim> variable_dims() const { return {}; }

  // The returned handle shares its TensorImpl with the registered one: to() and weight
  // loading update values in place, so member handles stay valid.
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Depth first, in registration order; names are dotted paths ("layers.3.linear1.weight").
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Looks up a parameter or buffer by dotted path; nullptr when absent.
  Tensor* find_tensor(const std::string& dotted_name);

  // Drops every parameter's accumulated gradient (torch's zero_grad(set_to_none=True)).
  void zero_grad();

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer, in place (handles stay valid); raises zc::Error for a
  // device this build or machine cannot use, and then changes nothing.
  void to(Device device);
  void to(DType dtype);

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  // Replaces the submodule `name` (which must exist) by `module`; compiled modules see the
  // module changed.
  void replace_child(const std::string& name, std::shared_ptr<Module> module);
  // Replaces the parameter or buffer `name` by buffer `value` (a layer whose weight changes
  // kind, as a quantized one's does); compiled modules see the module changed.
  Tensor replace_with_buffer(const std::string& name, Tensor value);

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
               bool buffers) const;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Activation checkpointing, as torch.utils.checkpoint.checkpoint: `checkpoint(block)` runs
// block's forward without keeping what its backward reads, and the backward runs it again.
// Eagerly: the forward runs with gradients off, and its backward runs the block once more from
// the saved inputs, with gradients, then backward through that (the block must compute the
// same thing twice: rand_like and dropout draw again, as torch's checkpoint without its RNG
// state). Compiled: the block's region is recomputed in the training backward (lower/partition.h)
// and only its inputs and outputs may be saved, whatever CompileOptions::activation_memory_budget
// says elsewhere. Without gradients wanted it is the block itself.
class Checkpoint : public Module {
 public:
  explicit Checkpoint(std::shared_ptr<Module> module);
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  const std::shared_ptr<Module>& module() const { return module_; }

 private:
  std::shared_ptr<Module> module_;
};
std::shared_ptr<Checkpoint> checkpoint(std::shared_ptr<Module> module);

// Scales the gradients of `parameters` (those that have one) together so that their norm is at
// most max_norm, as torch.nn.utils.clip_grad_norm_: the norm of all of them as one vector (p =
// norm_type: 2, any p > 0, or infinity), then each gradient times min(1, max_norm / (norm +
// 1e-6)), on the gradients' device without waiting for them. Returns that total norm (a 0-dim
// f32 tensor). A zc::Error for max_norm < 0, norm_type <= 0, or gradients on several devices.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0);

// How a layer's constructor fills its weights: `random` as torch initializes them; `none`
// allocates them and leaves their values unset, for a loader that assigns every one
// (from_pretrained), so that a large model does not draw billions of numbers it discards.
enum class Init : uint8_t { random, none };

// y = x W^T + b, W [out, in] initialized like torch (uniform in +-1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Init init = Init::random);
  Tensor forward(const Tensor& x) override;
  // Weight-only int8 (zc::quantize, zc/quantize.h): `weight` becomes a buffer of int8 values
  // w_q = round(w / s) in [-127, 127], with one scale per output channel s = max|w_row| / 127
  // in `weight_scale` ([out_features], the weight's dtype); forward computes
  // (x @ w_q^T) * s + bias, the weight converted to x's dtype where it is read. A zc::Error when
  // the layer is already quantized or its weight is not floating.
  void quantize_int8();
  bool quantized() const { return weight_scale.defined(); }
  // The dtype the layer computes in: its weight's, or a quantized layer's scales'.
  DType dtype() const { return quantized() ? weight_scale.dtype() : weight.dtype(); }
  Tensor weight, bias;  // bias undefined when bias=false
  Tensor weight_scale;  // defined once quantized
  int64_t in_features, out_features;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
};
class GELU : public Module {
 public:
  explicit GELU(GeluApprox approximate = GeluApprox::none) : approximate(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  GeluApprox approximate;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t d, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};

class Embedding : public Module {
 public:
  // Weights ~ N(0, 1) as torch's, or unset (Init::none).
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Init init = Init::random);
  Tensor forward(const Tensor& indices) override;
  Tensor weight;
};

// Identity in eval mode; in training, zeroes with probability p and rescales.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Holds submodules by index; it has no forward() of its own.
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  // Replaces module i (as `list[i] = m` does in torch), under the same name: wrapping a block
  // in nn::checkpoint, say.
  void set(size_t i, std::shared_ptr<Module> module);
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Convolutional layers over [N, C, H, W], as torch.nn's. Window arguments: one number for both
// dims or (h, w); Conv2d's padding may also be (top, left, bottom, right).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
         std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
         std::vector<int64_t> dilation = {1}, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;  // weight [out, in / groups, kh, kw]; bias undefined when bias=false
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                     std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1},
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::vector<int64_t> kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                     std::vector<int64_t> padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::vector<int64_t> kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::vector<int64_t> output_size);
  Tensor forward(const Tensor& x) override;
  std::vector<int64_t> output_size;
};

// Running statistics are buffers ("running_mean", "running_var"); in train() mode a call
// normalizes by the batch and updates them, in eval() by them (zc::batch_norm).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias, running_mean, running_var;
  double eps, momentum;
};

// Flattens dims start_dim..end_dim into one (torch.nn.Flatten's defaults: all but the batch).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  int64_t start_dim, end_dim;
};

// Self-attention over x [B, T, d_model] with one fused input projection (d -> 3d), as in
// GPT-2's c_attn, and an output projection.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t d_model, int64_t num_heads, bool causal = false, bool bias = true,
                     Init init = Init::random);
  Tensor forward(const Tensor& x) override;
  // With the KV cache allocated: forward({x [B, T, d_model], positions [T][, key_mask [B, L]]})
  // writes the step's keys and values at `positions` and attends to the cache
  // (cached_attention). {x} alone is forward(x).
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  // k_cache and v_cache [batch, num_heads, max_length, head_dim] in in_proj's dtype and on its
  // device, registered buffers from the first call on; the same sizes again keep them.
  void allocate_cache(int64_t batch, int64_t max_length);
  std::shared_ptr<Linear> in_proj, out_proj;
  int64_t d_model, num_heads;
  bool causal;
  Tensor k_cache, v_cache;  // undefined until allocate_cache

 private:
  // x [B, T, d_model] through in_proj, split into q, k, v [B, H, T, head_dim].
  std::vector<Tensor> project_heads(const Tensor& x);
};

// Attention of queries q [B, H, T, D] at cache positions `positions` [T] against a KV cache
// k_cache, v_cache [B, Hkv, L, D] (H a multiple of Hkv: grouped-query heads share their
// key-value head, read in place) that holds the step's own keys and values already: a query at
// position p sees positions 0..p, and with `key_mask` [B, L] only those its sequence holds
// (nonzero; zero: left padding). One attention op (its mask and grouped heads), computed in f32
// for 16-bit caches, the scale 1/sqrt(D); a query that sees no key gives zeros. Returns
// [B, H, T, D].
Tensor cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& positions, const Tensor& key_mask);
// The same with the positions each query sees given as `visible`, bool [B or 1, 1, T, L]
// (cached_attention_mask): a model computes it once for all its layers.
Tensor cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& visible);
// Which of a cache's `length` positions each query at `positions` [T] sees: positions up to its
// own, and with `key_mask` [B, L] (or undefined) only those its sequence holds. Bool
// [1, 1, T, L], or [B, 1, T, L] with a key_mask.
Tensor cached_attention_mask(const Tensor& positions, const Tensor& key_mask, int64_t length);

// Pre-LayerNorm transformer block (GPT-2): x + attn(ln1(x)), then x + mlp(ln2(x)) with a
// 4x GELU(tanh) MLP; in training mode with `dropout` > 0, each branch's output goes through
// dropout before it is added. Both LayerNorms use `layer_norm_eps`.
class TransformerBlock : public Module {
 public:
  // Init::none leaves the projections' weights undrawn (a checkpoint fills them).
  TransformerBlock(int64_t d_model, int64_t num_heads, bool causal = true, int64_t mlp_ratio = 4,
                   double dropout = 0.0, double layer_norm_eps = 1e-5, Init init = Init::random);
  Tensor forward(const Tensor& x) override;
  // The step with the attention's KV cache: forward({x, positions[, key_mask]}) -> {x}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<Linear> fc, proj;
  double dropout_p = 0.0;
};

// Loads every parameter and buffer of `module` from a safetensors file, by dotted name.
// Raises zc::Error for a missing name, a shape or dtype mismatch, or a malformed file; tensors
// in the file that the module does not have are ignored unless `strict`.
void load_safetensors(Module& module, const std::string& path, bool strict = false);
void save_safetensors(const Module& module, const std::string& path);

}  // namespace zc::nn

namespace zc::nn::functional {

// mean((input - target)^2) over every element; the shapes must be equal.
Tensor mse_loss(const Tensor& input, const Tensor& target);

// The mean negative log-likelihood of `targets` under softmax(logits), as
// torch.nn.functional.cross_entropy: logits [N, C] with integer targets [N] (or [C] with a
// 0-dim target). Targets equal to ignore_index contribute nothing and are not counted; any
// other target outside [0, C) raises zc::Error.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace zc::nn::functional
