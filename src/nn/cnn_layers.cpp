// The convolutional layers of zc/nn.h: parameters initialized as torch.nn's, forward through
// the functional ops.
#include <cmath>
#include <string>
#include <utility>

#include "nn/init.h"
#include "zc/factories.h"
#include "zc/nn.h"
#include "zc/ops.h"

namespace zc::nn {

namespace {

// (h, w) of a one-or-two-number window argument.
std::pair<int64_t, int64_t> hw(const char* module, const std::vector<int64_t>& v) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  throw Error(std::string(module) + ": kernel_size takes 1 or 2 numbers, got " +
              std::to_string(v.size()));
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
               std::vector<int64_t> stride, std::vector<int64_t> padding,
               std::vector<int64_t> dilation, int64_t groups, bool bias)
    : stride(std::move(stride)),
      padding(std::move(padding)),
      dilation(std::move(dilation)),
      groups(groups) {
  check_positive("zc::nn::Conv2d", "in_channels", in_channels);
  check_positive("zc::nn::Conv2d", "out_channels", out_channels);
  check_positive("zc::nn::Conv2d", "groups", groups);
  if (in_channels % groups != 0 || out_channels % groups != 0) {
    throw Error("zc::nn::Conv2d: groups " + std::to_string(groups) + " must divide in_channels " +
                std::to_string(in_channels) + " and out_channels " + std::to_string(out_channels));
  }
  auto [kh, kw] = hw("zc::nn::Conv2d", kernel_size);
  check_positive("zc::nn::Conv2d", "kernel_size", std::min(kh, kw));
  // torch's kaiming_uniform(a=sqrt(5)) bound over the fan-in, for the bias as well.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels / groups * kh * kw));
  weight =
      register_parameter("weight", uniform({out_channels, in_channels / groups, kh, kw}, bound));
  if (bias) this->bias = register_parameter("bias", uniform({out_channels}, bound));
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, stride, padding, dilation, groups);
}

MaxPool2d::MaxPool2d(std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                     std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode)
    : kernel_size(std::move(kernel_size)),
      stride(std::move(stride)),
      padding(std::move(padding)),
      dilation(std::move(dilation)),
      ceil_mode(ceil_mode) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

AvgPool2d::AvgPool2d(std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                     std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad)
    : kernel_size(std::move(kernel_size)),
      stride(std::move(stride)),
      padding(std::move(padding)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::vector<int64_t> output_size)
    : output_size(std::move(output_size)) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, output_size);
}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, bool affine)
    : eps(eps), momentum(momentum) {
  check_positive("zc::nn::BatchNorm2d", "num_features", num_features);
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", zeros({num_features}));
  }
  running_mean = register_buffer("running_mean", zeros({num_features}));
  running_var = register_buffer("running_var", ones({num_features}));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.dim() != 4) {
    throw Error("zc::nn::BatchNorm2d: expected an input [N, C, H, W], got " + shape_str(x.shape()));
  }
  return batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

}  // namespace zc::nn
