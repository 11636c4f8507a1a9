// Convolutional ops against direct float64 loops (the definitions, written out), eagerly and
// compiled, over strides, paddings, dilations, groups, ceil mode and odd sizes; batch norm's
// inference form against its definition; a small residual network compiled, with its repeated
// block found, and trained.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/dispatch.h"
#include "ops/registry.h"
#include "tensor/assign.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

double at(const Tensor& t, int64_t n, int64_t c, int64_t h, int64_t w) {
  const auto& s = t.strides();
  return t.data<double>()[t.storage_offset() + n * s[0] + c * s[1] + h * s[2] + w * s[3]];
}

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  bool bias;
};

// The definition: out[n, o, i, j] = b[o] + sum over the group's channels and the window.
Tensor reference_conv(const Tensor& x64, const Tensor& w64, const Tensor& b64, const ConvCase& c) {
  const int64_t n = c.x[0], h = c.x[2], wd = c.x[3];
  const int64_t co = c.w[0], cg = c.w[1], kh = c.w[2], kw = c.w[3];
  const int64_t sh = c.stride[0], sw = c.stride.back();
  int64_t pt, pl, pb, pr;
  if (c.padding.size() == 4) {
    pt = c.padding[0], pl = c.padding[1], pb = c.padding[2], pr = c.padding[3];
  } else {
    pt = pb = c.padding[0], pl = pr = c.padding.back();
  }
  const int64_t dh = c.dilation[0], dw = c.dilation.back();
  const int64_t oh = (h + pt + pb - dh * (kh - 1) - 1) / sh + 1;
  const int64_t ow = (wd + pl + pr - dw * (kw - 1) - 1) / sw + 1;
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t g = o / (co / c.groups);
          double acc = c.bias ? b64.data<double>()[o] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v) {
                const int64_t y = i * sh - pt + u * dh, xx = j * sw - pl + v * dw;
                if (y < 0 || y >= h || xx < 0 || xx >= wd) continue;
                acc += at(x64, b, g * cg + ci, y, xx) * at(w64, o, ci, u, v);
              }
          out.push_back(acc);
        }
  std::vector<float> f(out.begin(), out.end());
  return from_vector(f, {n, co, oh, ow}).to(DType::f64);
}

std::vector<ConvCase> conv_cases() {
  return {
      {{2, 3, 7, 5}, {4, 3, 3, 3}, {1}, {1}, {1}, 1, true},
      {{1, 4, 9, 8}, {6, 2, 3, 2}, {2, 1}, {0, 1, 2, 1}, {1}, 2, false},
      {{1, 2, 11, 10}, {3, 2, 3, 3}, {3}, {2}, {2, 3}, 1, true},
      {{3, 6, 5, 5}, {6, 1, 3, 3}, {2}, {1}, {1}, 6, true},      // depthwise
      {{2, 8, 6, 7}, {5, 8, 1, 1}, {1}, {0}, {1}, 1, true},      // pointwise: the product alone
      {{1, 8, 7, 7}, {4, 8, 1, 1}, {2}, {0}, {1}, 1, false},     // 1x1 stride 2 (a downsample)
      {{1, 3, 1, 9}, {2, 3, 1, 4}, {1}, {0}, {1}, 1, true},      // a row
      {{1, 3, 17, 19}, {16, 3, 7, 7}, {2}, {3}, {1}, 1, false},  // a ResNet stem, odd sizes
      // 3x3 at stride 1 over 30x29: Winograd on few threads (cpu/onednn_conv.h)
      {{1, 16, 30, 29}, {24, 16, 3, 3}, {1}, {1}, {1}, 1, true},
  };
}

// A module calling conv2d with the case's settings, so that compile() captures it.
struct ConvModule : nn::Module {
  ConvCase c;
  Tensor w, b;
  ConvModule(ConvCase cc, Tensor weight, Tensor bias) : c(std::move(cc)) {
    w = register_parameter("w", weight);
    if (bias.defined()) b = register_parameter("b", bias);
  }
  Tensor forward(const Tensor& x) override {
    return conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  }
};

TEST(CnnOps, Conv2dMatchesTheDefinitionEagerAndCompiled) {
  manual_seed(31);
  NoGradGuard no_grad;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " groups " + std::to_string(c.groups));
    Tensor x = randn(c.x), w = randn(c.w), b = c.bias ? randn({c.w[0]}) : Tensor();
    Tensor ref =
        reference_conv(x.to(DType::f64), w.to(DType::f64), c.bias ? b.to(DType::f64) : Tensor(), c);
    Tensor eager = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    ASSERT_EQ(eager.shape(), ref.shape());
    EXPECT_TRUE(allclose(eager.to(DType::f64), ref, 1e-4, 1e-4));
    // float64 end to end is exact to rounding.
    Tensor e64 = conv2d(x.to(DType::f64), w.to(DType::f64), c.bias ? b.to(DType::f64) : Tensor(),
                        c.stride, c.padding, c.dilation, c.groups);
    EXPECT_TRUE(allclose(e64, ref, 1e-6, 1e-6));
    auto m = std::make_shared<ConvModule>(c, w, b);
    Tensor compiled = compile(m)(x);
    EXPECT_TRUE(allclose(compiled.to(DType::f64), ref, 1e-4, 1e-4));
  }
}

// The columns as other backends than the CPU's compute them (the op's decomposition, run
// eagerly here) equal the op's own kernel: windows that overlap (stacked taps) and windows that
// tile the input (its blocks reordered), with padding and with a remainder no window covers.
TEST(CnnOps, Im2colDecompositionEqualsTheKernel) {
  manual_seed(37);
  NoGradGuard no_grad;
  const ops::OpDef& op = ops::op_def(ops::OpId::im2col);
  const std::vector<std::pair<Shape, ops::Pool2dAttrs>> cases{
      {{2, 3, 8, 12}, ops::Pool2dAttrs{4, 4, 4, 4, 0, 0, 0, 0, 1, 1, false, true}},
      {{1, 2, 10, 13}, ops::Pool2dAttrs{4, 3, 4, 3, 0, 0, 0, 0, 1, 1, false, true}},
      {{1, 2, 9, 7}, ops::Pool2dAttrs{2, 3, 2, 3, 1, 2, 2, 0, 1, 1, false, true}},
      {{2, 3, 6, 5}, ops::Pool2dAttrs{3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true}},
      {{1, 2, 7, 9}, ops::Pool2dAttrs{2, 2, 2, 2, 0, 0, 0, 0, 2, 1, false, true}},
  };
  for (const auto& [shape, attrs] : cases) {
    SCOPED_TRACE(shape_str(shape) + " window " + std::to_string(attrs.kernel_h) + "x" +
                 std::to_string(attrs.kernel_w) + " stride " + std::to_string(attrs.stride_h) +
                 "x" + std::to_string(attrs.stride_w));
    Tensor x = randn(shape);
    Tensor kernel = ops::call1(ops::OpId::im2col, {x}, attrs);
    std::vector<Tensor> decomposed = op.decompose({&x, 1}, attrs);
    ASSERT_EQ(decomposed.size(), 1u);
    ASSERT_EQ(decomposed[0].shape(), kernel.shape());
    EXPECT_TRUE(allclose(decomposed[0], kernel, 0, 0));
  }
}

struct PoolCase {
  Shape x;
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode, count_include_pad;
};

// The definition of both pools; avg's divisor as torch's kernels count it.
std::pair<Tensor, Tensor> reference_pools(const Tensor& x64, const PoolCase& c) {
  const int64_t n = c.x[0], ch = c.x[1], h = c.x[2], wd = c.x[3];
  const int64_t kh = c.kernel[0], kw = c.kernel.back();
  const int64_t sh = c.stride.empty() ? kh : c.stride[0];
  const int64_t sw = c.stride.empty() ? kw : c.stride.back();
  const int64_t ph = c.padding[0], pw = c.padding.back();
  const int64_t dh = c.dilation[0], dw = c.dilation.back();
  auto out_size = [&](int64_t len, int64_t k, int64_t s, int64_t p, int64_t d) {
    const int64_t span = len + 2 * p - d * (k - 1) - 1;
    int64_t o = (c.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (c.ceil_mode && (o - 1) * s >= len + p) --o;
    return o;
  };
  const int64_t oh = out_size(h, kh, sh, ph, dh), ow = out_size(wd, kw, sw, pw, dw);
  std::vector<float> mx, av;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < ch; ++k)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double m = -std::numeric_limits<double>::infinity(), s = 0;
          for (int64_t u = 0; u < kh; ++u)
            for (int64_t v = 0; v < kw; ++v) {
              const int64_t y = i * sh - ph + u * dh, xx = j * sw - pw + v * dw;
              if (y < 0 || y >= h || xx < 0 || xx >= wd) continue;
              m = std::max(m, at(x64, b, k, y, xx));
              s += at(x64, b, k, y, xx);
            }
          // avg (dilation 1): the window within the padded input, or within the input.
          const int64_t h0 = i * sh - ph, w0 = j * sw - pw;
          const int64_t h1 = std::min(h0 + kh, h + ph), w1 = std::min(w0 + kw, wd + pw);
          const int64_t count = c.count_include_pad
                                    ? (h1 - h0) * (w1 - w0)
                                    : (std::min(h1, h) - std::max<int64_t>(h0, 0)) *
                                          (std::min(w1, wd) - std::max<int64_t>(w0, 0));
          mx.push_back(static_cast<float>(m));
          av.push_back(static_cast<float>(s / count));
        }
  return {from_vector(mx, {n, ch, oh, ow}), from_vector(av, {n, ch, oh, ow})};
}

struct PoolModule : nn::Module {
  PoolCase c;
  bool max;
  PoolModule(PoolCase cc, bool m) : c(std::move(cc)), max(m) {}
  Tensor forward(const Tensor& x) override {
    if (max) return max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
    return avg_pool2d(x, c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad);
  }
};

TEST(CnnOps, PoolsMatchTheDefinitionEagerAndCompiled) {
  manual_seed(32);
  NoGradGuard no_grad;
  const std::vector<PoolCase> cases = {
      {{2, 3, 8, 7}, {3}, {2}, {1}, {1}, false, true},  // ResNet's stem pool, odd width
      {{1, 2, 9, 9}, {2}, {}, {0}, {1}, true, true},    // ceil mode
      {{1, 2, 10, 7}, {3, 2}, {2, 1}, {1, 0}, {1}, true, false},
      {{2, 1, 5, 6}, {2}, {1}, {1}, {1}, false, false},  // pad not counted
      {{1, 2, 4, 4}, {1}, {1}, {0}, {1}, false, true},   // 1x1: a copy
  };
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + std::to_string(c.kernel[0]));
    Tensor x = randn(c.x);
    auto [mx, av] = reference_pools(x.to(DType::f64), c);
    Tensor m = max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
    Tensor a = avg_pool2d(x, c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad);
    ASSERT_EQ(m.shape(), mx.shape());
    EXPECT_TRUE(allclose(m, mx, 0, 0));
    EXPECT_TRUE(allclose(a, av, 1e-5, 1e-6));
    EXPECT_TRUE(allclose(compile(std::make_shared<PoolModule>(c, true))(x), mx, 0, 0));
    EXPECT_TRUE(allclose(compile(std::make_shared<PoolModule>(c, false))(x), av, 1e-5, 1e-6));
  }
  // Dilated max pooling.
  PoolCase d{{1, 2, 9, 8}, {3, 2}, {2}, {1}, {2, 3}, false, true};
  Tensor x = randn(d.x);
  EXPECT_TRUE(allclose(max_pool2d(x, d.kernel, d.stride, d.padding, d.dilation),
                       reference_pools(x.to(DType::f64), d).first, 0, 0));
}

TEST(CnnOps, AdaptivePoolingCoversTheInputAsTorchDoes) {
  manual_seed(33);
  Tensor x = randn({2, 3, 7, 10});
  EXPECT_TRUE(allclose(adaptive_avg_pool2d(x, {1}), mean(x, {2, 3}, true), 1e-6, 1e-6));
  Tensor even = randn({1, 2, 8, 6});
  EXPECT_TRUE(allclose(adaptive_avg_pool2d(even, {4, 3}), avg_pool2d(even, {2}), 1e-6, 1e-6));
  // 7 rows into 3: [0, 3), [2, 5), [4, 7); 10 columns into 4: [0, 3), [2, 5), [5, 8), [7, 10).
  Tensor y = adaptive_avg_pool2d(x, {3, 4});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 3, 4}));
  Tensor cell = mean(x.slice(2, 2, 5).slice(3, 5, 8), {2, 3});
  EXPECT_TRUE(allclose(y.slice(2, 1, 2).slice(3, 2, 3).reshape({2, 3}), cell, 1e-6, 1e-6));
}

TEST(CnnOps, BatchNormInferenceIsItsDefinitionAndTrainingMovesTheStatistics) {
  manual_seed(34);
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  NoGradGuard no_grad;
  Tensor x = randn({4, 3, 5, 5}) * 2.0 + 1.0;
  // Training: batch statistics; the running ones move by momentum, the variance unbiased.
  Tensor y = (*bn)(x);
  Tensor m = mean(x, {0, 2, 3}), v = var(x, {0, 2, 3}, 0);
  Tensor expect = (x - m.reshape({1, 3, 1, 1})) / sqrt(v.reshape({1, 3, 1, 1}) + 1e-5);
  EXPECT_TRUE(allclose(y, expect, 1e-4, 1e-5));
  EXPECT_TRUE(allclose(bn->running_mean, m * 0.1, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(bn->running_var, var(x, {0, 2, 3}, 1) * 0.1 + 0.9, 1e-5, 1e-6));
  // Inference, with affine parameters: (x - mean) / sqrt(var + eps) * w + b, eager and compiled.
  assign_values(bn->weight, randn({3}));
  assign_values(bn->bias, randn({3}));
  bn->eval();
  auto per = [](const Tensor& t) { return t.reshape({1, 3, 1, 1}); };
  Tensor def = (x - per(bn->running_mean)) / sqrt(per(bn->running_var) + 1e-5) * per(bn->weight) +
               per(bn->bias);
  EXPECT_TRUE(allclose((*bn)(x), def, 1e-5, 1e-5));
  EXPECT_TRUE(allclose(compile(bn)(x), def, 1e-5, 1e-5));
  // Compiling it in training mode is refused rather than leaving the statistics unchanged.
  bn->train();
  test::expect_error_containing([&] { compile(bn)(x); }, "updates its running statistics");
}

// A residual network in ResNet's shape: stem, pool, four equal blocks, global pool, head.
struct Basic : nn::Module {
  std::shared_ptr<nn::Conv2d> c1, c2;
  std::shared_ptr<nn::BatchNorm2d> b1, b2;
  explicit Basic(int64_t ch) {
    c1 = register_module("c1", std::make_shared<nn::Conv2d>(
                                   ch, ch, std::vector<int64_t>{3}, std::vector<int64_t>{1},
                                   std::vector<int64_t>{1}, std::vector<int64_t>{1}, 1, false));
    b1 = register_module("b1", std::make_shared<nn::BatchNorm2d>(ch));
    c2 = register_module("c2", std::make_shared<nn::Conv2d>(
                                   ch, ch, std::vector<int64_t>{3}, std::vector<int64_t>{1},
                                   std::vector<int64_t>{1}, std::vector<int64_t>{1}, 1, false));
    b2 = register_module("b2", std::make_shared<nn::BatchNorm2d>(ch));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu((*b1)((*c1)(x)));
    return relu((*b2)((*c2)(h)) + x);
  }
};
struct TinyResNet : nn::Module {
  std::shared_ptr<nn::Conv2d> stem;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::MaxPool2d> pool;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::Linear> head;
  TinyResNet() {
    stem = register_module(
        "stem", std::make_shared<nn::Conv2d>(3, 8, std::vector<int64_t>{7}, std::vector<int64_t>{2},
                                             std::vector<int64_t>{3}));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(8));
    pool = register_module(
        "pool", std::make_shared<nn::MaxPool2d>(std::vector<int64_t>{3}, std::vector<int64_t>{2},
                                                std::vector<int64_t>{1}));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 4; ++i) blocks->push_back(std::make_shared<Basic>(8));
    head = register_module("head", std::make_shared<nn::Linear>(8, 5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = (*pool)(relu((*bn)((*stem)(x))));
    for (const auto& b : *blocks) h = (*b)(h);
    return (*head)(adaptive_avg_pool2d(h, {1}).flatten(1));
  }
};

TEST(CnnOps, AResidualNetworkCompilesItsBlockOnceAndMatchesEager) {
  manual_seed(35);
  auto net = std::make_shared<TinyResNet>();
  // Statistics that are not the identity, so the folded batch norm has work to do.
  {
    NoGradGuard no_grad;
    for (int i = 0; i < 3; ++i) (*net)(randn({2, 3, 32, 32}));
  }
  net->eval();
  NoGradGuard no_grad;
  Tensor x = randn({2, 3, 32, 32});
  compiler::reset();
  compiler::reset_stats();
  Tensor y = compile(net)(x);
  EXPECT_TRUE(allclose(y, (*net)(x), 1e-4, 1e-4));
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.regions_found, 4);
  EXPECT_EQ(s.region_graphs, 1);
}

TEST(CnnOps, ACompiledTrainingStepMatchesEager) {
  manual_seed(36);
  auto net = std::make_shared<TinyResNet>();
  for (auto& b : *net->blocks) b->eval();  // their batch norms use running statistics
  net->bn->eval();
  Tensor x = randn({2, 3, 16, 16}), target = randn({2, 5});
  auto grads = [&](bool compiled) {
    net->zero_grad();
    Tensor y = compiled ? compile(net)(x) : (*net)(x);
    nn::functional::mse_loss(y, target).backward();
    std::vector<Tensor> g;
    for (const Tensor& p : net->parameters()) g.push_back(p.grad());
    return g;
  };
  std::vector<Tensor> c = grads(true), e = grads(false);
  ASSERT_EQ(c.size(), e.size());
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_TRUE(c[i].defined() && e[i].defined()) << i;
    EXPECT_TRUE(allclose(c[i], e[i], 1e-3, 1e-4)) << "parameter " << i;
  }
}

// On a GPU the decompositions run as CUDA kernels and cuBLASLt products: the residual network,
// compiled there, equals the CPU's eager result.
TEST(CnnOpsGpu, AResidualNetworkCompiledOnCudaMatchesTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(37);
  auto net = std::make_shared<TinyResNet>();
  net->eval();
  NoGradGuard no_grad;
  Tensor x = randn({2, 3, 32, 32});
  Tensor want = (*net)(x);
  net->to(Device::cuda(0));
  Tensor got = compile(net)(x.to(Device::cuda(0))).to(Device::cpu());
  EXPECT_TRUE(allclose(got, want, 1e-3, 1e-3));
  // Eager ops on CUDA tensors too.
  EXPECT_TRUE(allclose((*net)(x.to(Device::cuda(0))).to(Device::cpu()), want, 1e-3, 1e-3));
}

TEST(CnnOps, BadArgumentsAreErrors) {
  Tensor x = randn({1, 4, 5, 5});
  test::expect_error_containing(
      [&] {
        conv2d(randn({4, 5, 5}), randn({2, 4, 3, 3}));
      },
      "expected an input [N, C, H, W]");
  test::expect_error_containing(
      [&] {
        conv2d(x, randn({2, 3, 3, 3}));
      },
      "the weight's dim 1 to be C / groups");
  test::expect_error_containing(
      [&] {
        conv2d(x, randn({2, 4, 3, 3}), randn({3}));
      },
      "expected a bias [2]");
  test::expect_error_containing([&] { conv2d(x, randn({2, 4, 7, 7})); }, "does not fit the input");
  test::expect_error_containing(
      [&] {
        conv2d(x, randn({2, 4, 3, 3}), {}, {0});
      },
      "strides and dilations must be positive");
  test::expect_error_containing(
      [&] {
        conv2d(x, randn({2, 4, 3, 3}), {}, {1}, {1, 2, 3});
      },
      "padding takes 1, 2 or 4 numbers");
  test::expect_error_containing([&] { max_pool2d(x, {2}, {2}, {2}); }, "exceeds half");
  test::expect_error_containing([&] { avg_pool2d(x.to(DType::i64), {2}); },
                                "expected a floating input");
  test::expect_error_containing([&] { batch_norm(x, randn({3}), randn({3})); },
                                "per-channel tensors [4]");
  test::expect_error_containing([&] { nn::Conv2d(4, 6, {3}, {1}, {0}, {1}, 4); },
                                "must divide in_channels 4 and out_channels 6");
}

}  // namespace
}  // namespace zc
