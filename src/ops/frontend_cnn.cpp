// The front ends of the convolutional ops: argument forms as in torch.nn.functional, checked
// and turned into the ops' typed attributes; adaptive pooling and batch norm as compositions.
#include <string>
#include <vector>

#include "ops/attrs.h"
#include "ops/dispatch.h"
#include "tensor/assign.h"
#include "zc/autograd.h"
#include "zc/ops.h"

namespace zc {

namespace {

struct Pair {
  int64_t h, w;
};

// One number for both dims, or (h, w).
Pair pair_of(const char* op, const char* what, const std::vector<int64_t>& v) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  throw Error(std::string(op) + ": " + what + " takes 1 or 2 numbers, got " +
              std::to_string(v.size()));
}

struct Pads {
  int64_t top, left, bottom, right;
};

// One number, (h, w), or (top, left, bottom, right).
Pads pads_of(const char* op, const std::vector<int64_t>& v) {
  if (v.size() == 4) return {v[0], v[1], v[2], v[3]};
  if (v.size() != 1 && v.size() != 2) {
    throw Error(std::string(op) + ": padding takes 1, 2 or 4 numbers, got " +
                std::to_string(v.size()));
  }
  Pair p = pair_of(op, "padding", v);
  return {p.h, p.w, p.h, p.w};
}

void check_defined(const char* op, const Tensor& x) {
  if (!x.defined()) throw Error(std::string(op) + ": the input is an undefined Tensor");
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  check_defined("conv2d", x);
  if (!weight.defined()) throw Error("conv2d: the weight is an undefined Tensor");
  const Pair s = pair_of("conv2d", "stride", stride), d = pair_of("conv2d", "dilation", dilation);
  const Pads p = pads_of("conv2d", padding);
  ops::Conv2dAttrs a{s.h, s.w, p.top, p.left, p.bottom, p.right, d.h, d.w, groups};
  if (bias.defined()) return ops::call1(ops::OpId::conv2d, {x, weight, bias}, a);
  return ops::call1(ops::OpId::conv2d, {x, weight}, a);
}

namespace {
ops::Pool2dAttrs pool_attrs(const char* op, const std::vector<int64_t>& kernel_size,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                            const std::vector<int64_t>& dilation, bool ceil_mode) {
  const Pair k = pair_of(op, "kernel_size", kernel_size);
  const Pair s = stride.empty() ? k : pair_of(op, "stride", stride);
  const Pair d = pair_of(op, "dilation", dilation);
  const Pads p = pads_of(op, padding);
  return ops::Pool2dAttrs{k.h,      k.w,     s.h, s.w, p.top,     p.left,
                          p.bottom, p.right, d.h, d.w, ceil_mode, true};
}
}  // namespace

Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                  const std::vector<int64_t>& dilation, bool ceil_mode) {
  check_defined("max_pool2d", x);
  return ops::call1(ops::OpId::max_pool2d, {x},
                    pool_attrs("max_pool2d", kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                  bool ceil_mode, bool count_include_pad) {
  check_defined("avg_pool2d", x);
  ops::Pool2dAttrs a = pool_attrs("avg_pool2d", kernel_size, stride, padding, {1}, ceil_mode);
  a.count_include_pad = count_include_pad;
  return ops::call1(ops::OpId::avg_pool2d, {x}, a);
}

Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<int64_t>& output_size) {
  check_defined("adaptive_avg_pool2d", x);
  const Pair o = pair_of("adaptive_avg_pool2d", "output_size", output_size);
  if (x.dim() != 4 || o.h < 1 || o.w < 1) {
    throw Error(
        "adaptive_avg_pool2d: expected an input [N, C, H, W] and a positive output "
        "size, got " +
        shape_str(x.shape()) + " and " + std::to_string(o.h) + "x" + std::to_string(o.w));
  }
  const int64_t h = x.size(2), w = x.size(3);
  if (o.h == 1 && o.w == 1) return mean(x, {2, 3}, true);
  if (h % o.h == 0 && w % o.w == 0) return avg_pool2d(x, {h / o.h, w / o.w});
  // Window i spans [floor(i * n / out), ceil((i + 1) * n / out)): sizes vary, so each output
  // row and column is a mean of its own slice.
  auto span = [](int64_t i, int64_t n, int64_t out) {
    return std::pair<int64_t, int64_t>{i * n / out, ((i + 1) * n + out - 1) / out};
  };
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < o.h; ++i) {
    auto [h0, h1] = span(i, h, o.h);
    std::vector<Tensor> cells;
    for (int64_t j = 0; j < o.w; ++j) {
      auto [w0, w1] = span(j, w, o.w);
      cells.push_back(mean(x.slice(2, h0, h1).slice(3, w0, w1), {2, 3}, true));
    }
    rows.push_back(cat(cells, 3));
  }
  return cat(rows, 2);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  check_defined("batch_norm", x);
  if (x.dim() < 2) {
    throw Error("batch_norm: expected an input [N, C, ...], got " + shape_str(x.shape()));
  }
  const int64_t c = x.size(1);
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias}) {
    if (t->defined() && t->shape() != Shape{c}) {
      throw Error("batch_norm: expected per-channel tensors [" + std::to_string(c) + "] for " +
                  shape_str(x.shape()) + ", got " + shape_str(t->shape()));
    }
  }
  if (!(eps >= 0)) throw Error("batch_norm: eps must be >= 0");
  const bool running = running_mean.defined() && running_var.defined();
  if (!training && !running) {
    throw Error("batch_norm: inference needs the running mean and variance");
  }
  Shape per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = c;
  if (!training) {
    // scale and shift are [C]: tiny, and x * scale + shift is one pointwise pass.
    Tensor scale = rsqrt(running_var + eps);
    if (weight.defined()) scale = scale * weight;
    Tensor shift = -running_mean * scale;
    if (bias.defined()) shift = shift + bias;
    return x * scale.reshape(per_channel) + shift.reshape(per_channel);
  }
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d != 1) dims.push_back(d);
  }
  const Tensor m = mean(x, dims, true);
  const Tensor v = var(x, dims, 0, true);
  Tensor y = (x - m) * rsqrt(v + eps);
  if (weight.defined()) y = y * weight.reshape(per_channel);
  if (bias.defined()) y = y + bias.reshape(per_channel);
  if (running) {
    if (x.is_traced()) {
      throw Error(
          "batch_norm: in training mode it updates its running statistics, which a "
          "compiled graph does not do; call model.eval() before compiling for "
          "inference, or train this module uncompiled");
    }
    NoGradGuard no_grad;
    const int64_t count = x.numel() / c;
    const double unbias = count > 1 ? static_cast<double>(count) / (count - 1) : 1.0;
    assign_values(running_mean, running_mean * (1.0 - momentum) +
                                    m.detach().reshape({c}).to(running_mean.dtype()) * momentum);
    assign_values(running_var,
                  running_var * (1.0 - momentum) +
                      v.detach().reshape({c}).to(running_var.dtype()) * (momentum * unbias));
  }
  return y;
}

}  // namespace zc
