// Small programs of one [3, 4] f32 input that together use every registered op (capture's
// coverage test asserts it), for the tests that push every op through a stage, and the module
// that runs one of them.
#pragma once

#include <functional>
#include <vector>

#include "ops/dispatch.h"
#include "zc/zc.h"

namespace zc::test {

using Program = std::function<Tensor(const Tensor&)>;

struct Fn : nn::Module {
  Program f;
  explicit Fn(Program f) : f(std::move(f)) {}
  Tensor forward(const Tensor& x) override { return f(x); }
};

// A module of several inputs and outputs around a function of them.
struct MultiFn : nn::Module {
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> f;
  explicit MultiFn(decltype(f) fn) : f(std::move(fn)) {}
  std::vector<Tensor> forward(const std::vector<Tensor>& x) override { return f(x); }
};

// Programs over a tensor with a dim of size 0, each with its input's shape: sums over an empty
// dim (the identity per row, the column form's rows among them) and kernels over no element.
inline std::vector<std::pair<Program, Shape>> empty_dim_programs() {
  return {
      {[](const Tensor& x) { return sum(x * 2.0, {1}) + 1.0; }, {3, 0}},
      {[](const Tensor& x) {
         return sum(exp(x), {0, 2}, true) - 2.0;
       },
       {4, 0, 5}},
      {[](const Tensor& x) { return relu(x * 2.0) + 1.0; }, {0, 3}},
      {[](const Tensor& x) { return sum(x, {1}); }, {0, 6}},
      {[](const Tensor& x) { return sum(x, {0}); }, {0, 600}},
  };
}

// `w` [5, 4] and `b` [5] for the linear layers, `table` [7, 4] for the embedding.
inline std::vector<Program> every_op_programs(const Tensor& w, const Tensor& b,
                                              const Tensor& table) {
  return {
      [](const Tensor& x) { return -abs(x) + exp(x) * log(abs(x) + 1.0); },
      [](const Tensor& x) {
        return index_copy(x, 0, from_values<int64_t>({2, 0}, {2}), x.slice(0, 1, 3) * 2.0);
      },
      [](const Tensor& x) { return sqrt(abs(x)) - rsqrt(abs(x) + 1.0) / tanh(x); },
      [](const Tensor& x) { return sigmoid(x) + relu(x) + gelu(x) + gelu(x, GeluApprox::tanh); },
      [](const Tensor& x) {
        return erf(x) + clamp(x, -0.5, 0.5) + cast(x, DType::f64).to(DType::f32);
      },
      [](const Tensor& x) { return pow(abs(x), 1.5) + maximum(x, x * 0.5) - minimum(x, 0.1 + x); },
      // Constant exponents of 2 and 3 are products in generated code (zc_square, zc_cube).
      [](const Tensor& x) { return pow(x, 2.0) - pow(x, 3.0) * 0.5; },
      [](const Tensor& x) {
        Tensor y = x * 4.0;
        return floor(y) + ceil(y) - round(y) * trunc(y) + sin(x) * cos(x);
      },
      [](const Tensor& x) { return asin(tanh(x)) - acos(tanh(x)) * atan(x); },
      [](const Tensor& x) {
        // Integer divisors of 0 among them.
        Tensor i = cast(x * 4.0, DType::i64);
        return fmod(x * 4.0, 1.5) + remainder(x * 4.0, -1.5) +
               cast(fmod(i, 3.0) - remainder(cast(i, DType::i32), i - 1.0), x.dtype());
      },
      [](const Tensor& x) {
        return where(gt(x, 0.0), x, zeros({})) + cast(eq(x, x), DType::f32) +
               cast(ne(x, 0.0), DType::f32) + cast(lt(x, 0.0), DType::f32) +
               cast(le(x, 0.0), DType::f32) + cast(ge(x, 0.0), DType::f32);
      },
      [](const Tensor& x) {
        return sum(x, {1}, true) + mean(x, {0}) + amax(x, {1}, true) + amin(x) +
               var(x, {1}, 1, true) + cast(argmax(x, 1, true), DType::f32);
      },
      [](const Tensor& x) {
        return sum(x.reshape({4, 3})
                       .t()
                       .permute({1, 0})
                       .reshape({3, 4})
                       .slice(1, 0, 4, 2)
                       .expand({2, 3, 2})
                       .contiguous(),
                   {0}) *
               x.detach().slice(1, 0, 2);
      },
      // Draws whose program value does not depend on them: every uniform value is below 1,
      // every normal one within 5.8.
      [](const Tensor& x) {
        return x * cast(lt(rand_like(x), 1.0), DType::f32) *
                   cast(lt(abs(randn_like(x)), 6.0), DType::f32) +
               1.0;
      },
      [=](const Tensor& x) { return matmul(linear(x, w, b), w) + matmul(linear(x, w), w); },
      [](const Tensor& x) { return softmax(x, 1) + log_softmax(x, 0) + layer_norm(x, {4}); },
      [=](const Tensor& x) {
        Tensor idx = cast(clamp(abs(x) * 2.0, 0.0, 6.0), DType::i64);
        return sum(embedding(table, idx), {2}) + cat({x, x}, 1).slice(1, 2, 6);
      },
      [](const Tensor& x) {
        // The gradient of an embedding of a [7, 4] table; not a public function.
        Tensor idx = cast(clamp(abs(x) * 2.0, 0.0, 6.0), DType::i64);
        Tensor g = x.unsqueeze(2).expand({3, 4, 4}) * 0.5;
        Tensor grad = ops::call1(ops::OpId::embedding_backward, {g, idx}, ops::ShapeAttrs{{7, 4}});
        return x + sum(grad, {0});
      },
      [](const Tensor& x) {
        Tensor q = x.reshape({1, 3, 4});
        return scaled_dot_product_attention(q, q, q, true).reshape({3, 4});
      },
      [](const Tensor& x) {
        // The ops attention's derivative is made of; not public functions.
        Tensor q = x.reshape({1, 3, 4}), k = q * 0.5, v = exp(q), g = q - 0.25;
        Tensor lse = ops::call1(ops::OpId::attention_lse, {q, k}, ops::AttentionAttrs{true, 0.5});
        Tensor delta = sum(g * scaled_dot_product_attention(q, k, v, true, 0.5), {-1});
        auto grad = [&](ops::AttentionWrt wrt) {
          return ops::call1(ops::OpId::attention_grad, {q, k, v, g, lse, delta},
                            ops::AttentionGradAttrs{true, 0.5, wrt});
        };
        Tensor kv = grad(ops::AttentionWrt::kv);
        return (grad(ops::AttentionWrt::q) + kv.slice(2, 0, 4) * kv.slice(2, 4, 8))
                   .reshape({3, 4}) +
               lse.reshape({3, 1});
      },
      [](const Tensor& x) {
        // [3, 4] as one image [1, 3, 2, 2]: a grouped convolution, and both pools.
        Tensor img = x.reshape({1, 3, 2, 2});
        Tensor conv = conv2d(img, img.reshape({3, 1, 2, 2}) * 0.5, {}, {1}, {1}, {1}, 3);
        Tensor pooled = sum(max_pool2d(conv, {2}, {1}), {2, 3}) +
                        sum(avg_pool2d(conv, {3}, {1}, {1}, false, false), {2, 3});
        return x + pooled.reshape({3, 1});
      },
      [](const Tensor& x) {
        // A channels-last convolution with its fused epilogue (what the channels_last pass
        // makes); not a public function.
        Tensor img = x.reshape({1, 2, 2, 3});
        Tensor y = ops::call1(ops::OpId::conv2d_nhwc, {img, x.reshape({3, 1, 2, 2}), img},
                              ops::Conv2dAttrs{1, 1, 0, 1, 1, 0, 1, 1, 3, true, true});
        return x + sum(y.reshape({3, 4}), {1}, true);
      },
      [](const Tensor& x) {
        // A convolution with its fused epilogue in [N, C, H, W] (what conv_epilogues makes);
        // not a public function.
        Tensor img = x.reshape({1, 3, 2, 2});
        Tensor y = ops::call1(ops::OpId::conv2d, {img, x.reshape({3, 1, 2, 2}), img},
                              ops::Conv2dAttrs{1, 1, 0, 1, 1, 0, 1, 1, 3, true, true});
        return x + sum(y.reshape({3, 4}), {1}, true);
      },
      [](const Tensor& x) {
        // A convolution's columns (conv2d's decomposition); not a public function.
        Tensor img = x.reshape({1, 3, 2, 2});
        Tensor cols = ops::call1(ops::OpId::im2col, {img},
                                 ops::Pool2dAttrs{2, 2, 1, 1, 1, 0, 0, 1, 1, 1, false, true});
        return x + sum(cols.reshape({3, 16}), {1}, true);
      },
  };
}

}  // namespace zc::test
