#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "nn/init.h"
#include "zc/autograd.h"
#include "zc/factories.h"
#include "zc/nn.h"
#include "zc/ops.h"

namespace zc::nn {

namespace {

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Init init)
    : in_features(in_features), out_features(out_features) {
  check_positive("zc::nn::Linear", "in_features", in_features);
  check_positive("zc::nn::Linear", "out_features", out_features);
  // kaiming_uniform(a=sqrt(5)) as torch does reduces to this bound, for bias as well.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  auto values = [&](const Shape& shape) {
    return init == Init::random ? uniform(shape, bound) : Tensor::empty(shape);
  };
  weight = register_parameter("weight", values({out_features, in_features}));
  if (bias) this->bias = register_parameter("bias", values({out_features}));
}

Tensor Linear::forward(const Tensor& x) {
  if (!quantized()) return linear(x, weight, bias);
  // The int8 weight converted where it is read (a generated product reads the int8 bytes),
  // the scales applied to the product's columns, then the bias.
  Tensor y = linear(x, weight.to(x.dtype())) * weight_scale;
  return bias.defined() ? y + bias : y;
}

void Linear::quantize_int8() {
  if (quantized()) throw Error("zc::nn::Linear::quantize_int8: the layer is already quantized");
  if (!is_floating(weight.dtype())) {
    throw Error("zc::nn::Linear::quantize_int8: the weight is " +
                std::string(dtype_name(weight.dtype())) + "; expected a floating dtype");
  }
  NoGradGuard no_grad;
  const Tensor w = weight.detach().to(DType::f32);
  // [out, 1], in the dtype forward multiplies by; a row of zeros gets a tiny scale and zeros.
  const Tensor scale =
      (clamp(zc::amax(abs(w), {1}, true), 1e-30, std::nullopt) / 127.0).to(weight.dtype());
  const Tensor q = clamp(round(w / scale.to(DType::f32)), -127.0, 127.0).to(DType::i8);
  weight_scale = register_buffer("weight_scale", scale.reshape({out_features}));
  weight = replace_with_buffer("weight", q);
}

LayerNorm::LayerNorm(int64_t d, double eps, bool elementwise_affine)
    : LayerNorm(Shape{d}, eps, elementwise_affine) {}

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape)), eps(eps) {
  if (this->normalized_shape.empty()) {
    throw Error("zc::nn::LayerNorm: normalized_shape must have at least one dimension");
  }
  for (int64_t d : this->normalized_shape) {
    if (d <= 0) {
      throw Error("zc::nn::LayerNorm: normalized_shape " + shape_str(this->normalized_shape) +
                  " must have positive sizes");
    }
  }
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    throw Error("zc::nn::LayerNorm: eps must be finite and non-negative, got " +
                format_double(eps));
  }
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(this->normalized_shape));
    bias = register_parameter("bias", zeros(this->normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Init init) {
  check_positive("zc::nn::Embedding", "num_embeddings", num_embeddings);
  check_positive("zc::nn::Embedding", "embedding_dim", embedding_dim);
  const Shape shape{num_embeddings, embedding_dim};
  weight = register_parameter("weight", init == Init::random ? randn(shape) : Tensor::empty(shape));
}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(weight, indices);
}

Dropout::Dropout(double p) : p(p) {
  // p == 1 would divide by zero when rescaling; torch allows it, we have no use for it.
  if (!(p >= 0.0 && p < 1.0)) {
    throw Error("zc::nn::Dropout: p must be in [0, 1), got " + format_double(p));
  }
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p == 0.0) return x;
  return dropout(x, p);
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& m : modules_) y = (*m)(y);
  return y;
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  if (i >= modules_.size()) {
    throw Error("zc::nn::Sequential: index " + std::to_string(i) + " is out of range for " +
                std::to_string(modules_.size()) + " modules");
  }
  return modules_[i];
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

void ModuleList::set(size_t i, std::shared_ptr<Module> module) {
  if (i >= modules_.size()) {
    throw Error("zc::nn::ModuleList: index " + std::to_string(i) + " is out of range for " +
                std::to_string(modules_.size()) + " modules");
  }
  replace_child(std::to_string(i), module);
  modules_[i] = std::move(module);
}

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
  if (i >= modules_.size()) {
    throw Error("zc::nn::ModuleList: index " + std::to_string(i) + " is out of range for " +
                std::to_string(modules_.size()) + " modules");
  }
  return modules_[i];
}

}  // namespace zc::nn
