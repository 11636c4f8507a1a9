// Every op's derivative rule against central finite differences in float64: for random
// weights r, the gradient of sum(f(inputs) * r) that backward() computes must match
// (L(x + eps) - L(x - eps)) / 2 eps for every element of every floating input. Inputs come in
// the kinds the op tests use: broadcast operands, strided (transposed) leaves, size-1 dims,
// reductions over each axis.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

struct Case {
  std::string op;  // the op whose rule the case checks; it must be in the recorded graph
  std::string what;
  Fn f;
  Inputs inputs;
  double eps = 1e-6;
  double tol = 1e-6;
};

Tensor rnd(const Shape& s) {
  return randn(s).to(DType::f64);
}
// Values at least 0.1 away from zero (for abs, relu: no kink within eps).
Tensor away_from_zero(const Shape& s) {
  Tensor x = rnd(s);
  return where(gt(x, 0.0), x + 0.1, x - 0.1);
}
Tensor positive(const Shape& s) {
  return abs(rnd(s)) + 0.5;
}
// A leaf whose strides are not contiguous: the transpose of a [cols, rows] tensor.
Tensor strided(int64_t rows, int64_t cols) {
  return rnd({cols, rows}).t();
}

double* element(const Tensor& t, int64_t flat) {
  int64_t offset = t.storage_offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (flat % t.shape()[d]) * t.strides()[d];
    flat /= t.shape()[d];
  }
  return static_cast<double*>(t.unsafe_impl()->storage->data()) + offset;
}

void collect_ops(const std::shared_ptr<autograd::Node>& n, std::set<std::string>& seen,
                 std::set<const autograd::Node*>& visited) {
  if (!n || !visited.insert(n.get()).second) return;
  seen.insert(n->name());
  for (const autograd::Edge& e : n->next) collect_ops(e.fn, seen, visited);
}

void check(const Case& c) {
  SCOPED_TRACE(c.op + ": " + c.what);
  Inputs leaves;
  for (const Tensor& t : c.inputs) {
    Tensor leaf = t.detach();
    if (is_floating(leaf.dtype())) leaf.requires_grad_();
    leaves.push_back(leaf);
  }
  Tensor y = c.f(leaves);
  ASSERT_EQ(y.dtype(), DType::f64);
  Tensor r = rnd(y.shape());
  Tensor loss = sum(y * r);
  std::set<std::string> ops;
  std::set<const autograd::Node*> visited;
  collect_ops(loss.unsafe_impl()->autograd->grad_fn, ops, visited);
  EXPECT_TRUE(ops.count(c.op)) << "the case never recorded op " << c.op;
  loss.backward();

  auto value = [&] {
    NoGradGuard no_grad;
    return sum(c.f(leaves) * r).item<double>();
  };
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& x = leaves[i];
    if (!is_floating(x.dtype())) continue;
    ASSERT_TRUE(x.grad().defined()) << "input " << i << " got no gradient";
    ASSERT_EQ(x.grad().shape(), x.shape()) << "input " << i;
    ASSERT_EQ(x.grad().dtype(), x.dtype()) << "input " << i;
    Tensor analytic = x.grad().contiguous();
    for (int64_t j = 0; j < x.numel(); ++j) {
      double* p = element(x, j);
      const double saved = *p;
      *p = saved + c.eps;
      const double up = value();
      *p = saved - c.eps;
      const double down = value();
      *p = saved;
      const double numeric = (up - down) / (2 * c.eps);
      const double got = analytic.data<double>()[j];
      EXPECT_NEAR(got, numeric, c.tol * (1 + std::abs(numeric)))
          << "input " << i << " element " << j;
    }
  }
}

std::vector<Case> cases() {
  using namespace zc;
  std::vector<Case> out;
  auto add = [&](std::string op, std::string what, Fn f, Inputs in, double eps = 1e-6,
                 double tol = 1e-6) {
    out.push_back(Case{std::move(op), std::move(what), std::move(f), std::move(in), eps, tol});
  };
  // Unary.
  add("neg", "strided", [](const Inputs& x) { return -x[0]; }, {strided(3, 4)});
  add("abs", "", [](const Inputs& x) { return abs(x[0]); }, {away_from_zero({3, 4})});
  add("exp", "", [](const Inputs& x) { return exp(x[0]); }, {rnd({3, 4})});
  add("log", "", [](const Inputs& x) { return log(x[0]); }, {positive({3, 4})});
  add("sqrt", "", [](const Inputs& x) { return sqrt(x[0]); }, {positive({3, 4})});
  add("rsqrt", "size-1", [](const Inputs& x) { return rsqrt(x[0]); }, {positive({3, 1})});
  add("tanh", "strided", [](const Inputs& x) { return tanh(x[0]); }, {strided(2, 5)});
  add("sigmoid", "", [](const Inputs& x) { return sigmoid(x[0]); }, {rnd({4})});
  add("relu", "", [](const Inputs& x) { return relu(x[0]); }, {away_from_zero({3, 4})});
  add("gelu", "erf", [](const Inputs& x) { return gelu(x[0]); }, {rnd({3, 4})});
  add("gelu", "tanh", [](const Inputs& x) { return gelu(x[0], GeluApprox::tanh); }, {rnd({3, 4})});
  add("erf", "", [](const Inputs& x) { return erf(x[0]); }, {rnd({3, 4})});
  // Zero wherever the derivative exists (random values are never integers or halves).
  add("floor", "", [](const Inputs& x) { return floor(x[0] * 3.0); }, {rnd({3, 4})});
  add("ceil", "strided", [](const Inputs& x) { return ceil(x[0] * 3.0); }, {strided(3, 4)});
  add("round", "", [](const Inputs& x) { return round(x[0] * 3.0); }, {rnd({3, 4})});
  add("trunc", "", [](const Inputs& x) { return trunc(x[0] * 3.0); }, {rnd({3, 4})});
  add("sin", "", [](const Inputs& x) { return sin(x[0] * 3.0); }, {rnd({3, 4})});
  add("cos", "strided", [](const Inputs& x) { return cos(x[0] * 3.0); }, {strided(2, 5)});
  // tanh keeps the arguments inside (-1, 1), where asin and acos are differentiable.
  add("asin", "", [](const Inputs& x) { return asin(tanh(x[0])); }, {rnd({3, 4})});
  add("acos", "strided", [](const Inputs& x) { return acos(tanh(x[0])); }, {strided(2, 5)});
  add("atan", "", [](const Inputs& x) { return atan(x[0] * 3.0); }, {rnd({3, 4})});
  add("clamp", "both bounds", [](const Inputs& x) { return clamp(x[0], -0.5, 0.5); },
      {from_vector({-1.0f, -0.3f, 0.2f, 0.7f, 0.45f, -0.9f}, {2, 3}).to(DType::f64)});
  add("clamp", "min only", [](const Inputs& x) { return clamp(x[0], 0.0, std::nullopt); },
      {away_from_zero({5})});
  add("cast", "f64 to f64", [](const Inputs& x) { return cast(x[0], DType::f64) * 3.0; },
      {rnd({3})});
  add(
      "cast", "through f32", [](const Inputs& x) { return x[0].to(DType::f32).to(DType::f64); },
      {rnd({3})}, 1e-3, 1e-3);

  // Binary, broadcast both ways, with numbers.
  auto binary = [&](std::string op, std::function<Tensor(const Tensor&, const Tensor&)> f,
                    std::function<Tensor(const Shape&)> make_a,
                    std::function<Tensor(const Shape&)> make_b) {
    Fn g = [f](const Inputs& x) { return f(x[0], x[1]); };
    add(op, "same shape", g, {make_a({3, 4}), make_b({3, 4})});
    add(op, "[3,4] with [4]", g, {make_a({3, 4}), make_b({4})});
    add(op, "[3,1] with [1,4]", g, {make_a({3, 1}), make_b({1, 4})});
    add(op, "[2,3,4] with [3,1]", g, {make_a({2, 3, 4}), make_b({3, 1})});
    add(op, "strided with [4]", g, {strided(3, 4) * 0 + make_a({3, 4}), make_b({4})});
  };
  binary(
      "add", [](auto& a, auto& b) { return a + b; }, rnd, rnd);
  binary(
      "sub", [](auto& a, auto& b) { return a - b; }, rnd, rnd);
  binary(
      "mul", [](auto& a, auto& b) { return a * b; }, rnd, rnd);
  binary(
      "div", [](auto& a, auto& b) { return a / b; }, rnd, positive);
  binary(
      "pow", [](auto& a, auto& b) { return pow(a, b); }, positive, rnd);
  binary(
      "maximum", [](auto& a, auto& b) { return maximum(a, b); }, rnd, rnd);
  binary(
      "minimum", [](auto& a, auto& b) { return minimum(a, b); }, rnd, rnd);
  // Divisors of either sign, at least 0.1 from zero.
  binary(
      "fmod", [](auto& a, auto& b) { return fmod(a * 3.0, b); }, rnd, away_from_zero);
  binary(
      "remainder", [](auto& a, auto& b) { return remainder(a * 3.0, b); }, rnd, away_from_zero);
  add("mul", "a number", [](const Inputs& x) { return x[0] * 2.5; }, {rnd({3})});
  add("pow", "a number exponent", [](const Inputs& x) { return pow(x[0], 3.0); }, {rnd({4})});
  add("sub", "number minus tensor", [](const Inputs& x) { return 1.0 - x[0]; }, {rnd({4})});
  add("where", "broadcast branches", [](const Inputs& x) { return where(x[0], x[1], x[2]); },
      {gt(rnd({3, 4}), 0.0), rnd({4}), rnd({3, 1})});

  // Reductions over each axis, all axes, with and without keepdim.
  for (std::string op : {"sum", "mean", "amax", "amin", "var"}) {
    auto reduce = [op](const Tensor& x, std::vector<int64_t> dims, bool keep) {
      if (op == "sum") return sum(x, dims, keep);
      if (op == "mean") return mean(x, dims, keep);
      if (op == "amax") return amax(x, dims, keep);
      if (op == "amin") return amin(x, dims, keep);
      return var(x, dims, 1, keep);
    };
    for (std::vector<int64_t> dims : {std::vector<int64_t>{0}, {1}, {2}, {0, 2}, {}}) {
      for (bool keep : {false, true}) {
        add(op, "dims " + shape_str(dims) + (keep ? " keepdim" : ""),
            [=](const Inputs& x) { return reduce(x[0], dims, keep); }, {rnd({2, 3, 4})});
      }
    }
    add(op, "strided", [=](const Inputs& x) { return reduce(x[0], {1}, false); }, {strided(3, 4)});
  }

  // Layout.
  add("reshape", "",
      [](const Inputs& x) {
        return x[0].reshape({4, 3}) * x[1];
      },
      {rnd({3, 4}), rnd({4, 3})});
  add("permute", "", [](const Inputs& x) { return x[0].permute({2, 0, 1}); }, {rnd({2, 3, 4})});
  add("expand", "size-1 dims",
      [](const Inputs& x) {
        return x[0].expand({2, 3, 4});
      },
      {rnd({3, 1})});
  add("slice", "step 1", [](const Inputs& x) { return x[0].slice(1, 1, 3); }, {rnd({3, 4})});
  add("slice", "step 2 from 1", [](const Inputs& x) { return x[0].slice(0, 1, 6, 2); },
      {rnd({6, 2})});
  add("slice", "step 3, odd end", [](const Inputs& x) { return x[0].slice(1, 0, 7, 3); },
      {rnd({2, 7})});
  add("copy", "strided", [](const Inputs& x) { return x[0].contiguous(); }, {strided(3, 4)});

  // Products.
  auto mm = [](const Inputs& x) { return matmul(x[0], x[1]); };
  add("matmul", "2-D", mm, {rnd({3, 4}), rnd({4, 5})});
  add("matmul", "1-D x 2-D", mm, {rnd({4}), rnd({4, 5})});
  add("matmul", "2-D x 1-D", mm, {rnd({3, 4}), rnd({4})});
  add("matmul", "1-D x 1-D", mm, {rnd({4}), rnd({4})});
  add("matmul", "batched x 2-D", mm, {rnd({2, 3, 4}), rnd({4, 5})});
  add("matmul", "broadcast batch", mm, {rnd({2, 1, 3, 4}), rnd({3, 4, 2})});
  add("matmul", "strided", mm, {strided(3, 4), strided(4, 2)});
  add("linear", "bias", [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
      {rnd({2, 3, 4}), rnd({5, 4}), rnd({5})});
  add("linear", "no bias, 1-D input", [](const Inputs& x) { return linear(x[0], x[1]); },
      {rnd({4}), rnd({5, 4})});

  // Rows.
  for (int64_t dim : {0, 1}) {
    add("softmax", "dim " + std::to_string(dim),
        [=](const Inputs& x) { return softmax(x[0], dim); }, {rnd({3, 4})});
    add("log_softmax", "dim " + std::to_string(dim),
        [=](const Inputs& x) { return log_softmax(x[0], dim); }, {rnd({3, 4})});
  }
  add("layer_norm", "weight and bias",
      [](const Inputs& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
      {rnd({2, 3, 4}), rnd({4}), rnd({4})});
  add("layer_norm", "two dims, no affine",
      [](const Inputs& x) {
        return layer_norm(x[0], {3, 4});
      },
      {rnd({2, 3, 4})});
  add("layer_norm", "strided, weight only",
      [](const Inputs& x) { return layer_norm(x[0], {4}, x[1]); }, {strided(3, 4), rnd({4})});

  // Gathers.
  add("embedding", "repeated rows", [](const Inputs& x) { return embedding(x[0], x[1]); },
      {rnd({5, 3}), from_vector({0, 2, 2, 4, 0, 1}, {2, 3}).to(DType::i64)});
  add("cat", "three along dim 1",
      [](const Inputs& x) {
        return cat({x[0], x[1], x[2]}, 1);
      },
      {rnd({2, 1}), rnd({2, 3}), strided(2, 2)});

  // Attention, causal and not, with a broadcast batch.
  for (bool causal : {false, true}) {
    add("attention", causal ? "causal" : "full",
        [=](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], causal); },
        {rnd({2, 3, 4}), rnd({2, 3, 4}), rnd({2, 3, 2})});
  }
  add("attention", "broadcast k, v; other lengths",
      [](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], false, 0.7); },
      {rnd({2, 2, 4}), rnd({1, 5, 4}), rnd({5, 3})});
  // The derivative's fused ops (attention_lse, attention_grad) at their edges.
  auto causal = [](const Inputs& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], true, 0.9);
  };
  add("attention", "causal, more keys than queries", causal,
      {rnd({2, 3, 4}), rnd({2, 5, 4}), rnd({2, 5, 2})});
  add("attention", "causal, more queries than keys", causal,
      {rnd({1, 5, 3}), rnd({1, 2, 3}), rnd({1, 2, 4})});
  add("attention", "causal, size-1 dims and one key", causal,
      {rnd({1, 2, 1, 3}), rnd({2, 1, 1, 3}), rnd({1, 1, 2})});
  add("attention", "causal, broadcast batch, strided leaves", causal,
      {rnd({2, 1, 4, 3}).transpose(-2, -1), rnd({3, 4, 5}).transpose(-2, -1), strided(5, 2)});

  // Convolutions and pools: strides, asymmetric padding, dilation, groups, ceil mode.
  add("conv2d", "3x3, padding 1, bias",
      [](const Inputs& x) { return conv2d(x[0], x[1], x[2], {1}, {1}); },
      {rnd({2, 3, 5, 4}), rnd({4, 3, 3, 3}), rnd({4})});
  add("conv2d", "stride 2, pads (0, 1, 2, 1), dilation (2, 1), no bias",
      [](const Inputs& x) {
        return conv2d(x[0], x[1], {}, {2}, {0, 1, 2, 1}, {2, 1});
      },
      {rnd({1, 2, 7, 6}), rnd({3, 2, 2, 3})});
  add("conv2d", "groups 2, 1x1 and strided leaf",
      [](const Inputs& x) { return conv2d(x[0], x[1], x[2], {1}, {0}, {1}, 2); },
      {rnd({2, 3, 4, 4}).transpose(1, 3), rnd({6, 2, 1, 1}), rnd({6})});
  add("conv2d", "depthwise 3x3 stride 2",
      [](const Inputs& x) { return conv2d(x[0], x[1], {}, {2}, {1}, {1}, 3); },
      {rnd({1, 3, 5, 5}), rnd({3, 1, 3, 3})});
  // conv2d's fused epilogue (what conv_epilogues makes for cuDNN): a residual and a ReLU, and
  // a residual without a bias.
  add("conv2d", "3x3 padding 1, bias, residual and ReLU",
      [](const Inputs& x) {
        return ops::call1(ops::OpId::conv2d, {x[0], x[1], x[2], x[3]},
                          ops::Conv2dAttrs{1, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
      },
      {rnd({2, 3, 5, 4}), rnd({4, 3, 3, 3}), rnd({4}), rnd({2, 4, 5, 4})});
  add("conv2d", "stride 2, no bias, residual",
      [](const Inputs& x) {
        return ops::call1(ops::OpId::conv2d, {x[0], x[1], x[2]},
                          ops::Conv2dAttrs{2, 2, 0, 0, 0, 0, 1, 1, 1, true, false});
      },
      {rnd({1, 2, 6, 5}), rnd({3, 2, 2, 2}), rnd({1, 3, 3, 2})});
  // conv2d_nhwc's epilogue (a residual, a ReLU) and its channels-last operands.
  add("conv2d_nhwc", "3x3 padding 1, bias, residual and ReLU",
      [](const Inputs& x) {
        return ops::call1(ops::OpId::conv2d_nhwc, {x[0], x[1], x[2], x[3]},
                          ops::Conv2dAttrs{1, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
      },
      {rnd({2, 5, 4, 3}), rnd({4, 3, 3, 3}), rnd({4}), rnd({2, 5, 4, 4})});
  add("conv2d_nhwc", "stride 2, groups 2, no bias, no epilogue",
      [](const Inputs& x) {
        return ops::call1(ops::OpId::conv2d_nhwc, {x[0], x[1]},
                          ops::Conv2dAttrs{2, 2, 0, 1, 1, 0, 1, 1, 2});
      },
      {rnd({1, 6, 5, 4}), rnd({6, 2, 2, 2})});
  add("im2col", "2x3 window, stride 2, pads (1, 0, 0, 2), dilation (1, 2)",
      [](const Inputs& x) {
        return ops::call1(ops::OpId::im2col, {x[0]},
                          ops::Pool2dAttrs{2, 3, 2, 2, 1, 0, 0, 2, 1, 2, false, true});
      },
      {rnd({1, 2, 5, 6})});
  add("max_pool2d", "3x3 stride 2 padding 1",
      [](const Inputs& x) { return max_pool2d(x[0], {3}, {2}, {1}); }, {rnd({2, 2, 6, 5})});
  add("max_pool2d", "2x2 dilation 2, ceil mode",
      [](const Inputs& x) { return max_pool2d(x[0], {2}, {2}, {0}, {2}, true); },
      {rnd({1, 2, 6, 7})});
  add("max_pool2d", "channels-last, 3x3 stride 2 padding 1, ceil mode",
      [](const Inputs& x) {
        ops::Pool2dAttrs a{3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true};
        a.channels_last = true;
        return ops::call1(ops::OpId::max_pool2d, {x[0]}, a);
      },
      {rnd({2, 6, 5, 3})});
  add("avg_pool2d", "3x3 stride 2 padding 1, pad counted",
      [](const Inputs& x) { return avg_pool2d(x[0], {3}, {2}, {1}); }, {rnd({2, 2, 6, 5})});
  add("avg_pool2d", "2x3 pad not counted, ceil mode",
      [](const Inputs& x) {
        return avg_pool2d(x[0], {2, 3}, {2}, {1}, true, false);
      },
      {rnd({1, 2, 5, 7})});
  return out;
}

TEST(Derivatives, EveryRuleMatchesFiniteDifferences) {
  manual_seed(11);
  for (const Case& c : cases()) check(c);
}

// Every op with a derivative rule has a case above.
TEST(Derivatives, EveryRuleHasACase) {
  manual_seed(11);
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.op);
  for (int i = 0; i < ops::kNumOps; ++i) {
    const ops::OpDef& def = ops::op_def(static_cast<ops::OpId>(i));
    if (def.derivative) {
      EXPECT_TRUE(covered.count(std::string(def.name))) << def.name;
    }
  }
}

// Ties of maximum/minimum split the gradient, amax's ties share it, as torch.
TEST(Derivatives, TiesShareTheGradient) {
  Tensor a = from_vector({1.0f, 2.0f, 3.0f}, {3}).requires_grad_();
  Tensor b = from_vector({1.0f, 5.0f, 0.0f}, {3}).requires_grad_();
  sum(maximum(a, b)).backward();
  EXPECT_TRUE(allclose(a.grad(), from_vector({0.5f, 0.0f, 1.0f}, {3})));
  EXPECT_TRUE(allclose(b.grad(), from_vector({0.5f, 1.0f, 0.0f}, {3})));
  Tensor x = from_vector({2.0f, 7.0f, 7.0f, 1.0f}, {4}).requires_grad_();
  amax(x).backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector({0.0f, 0.5f, 0.5f, 0.0f}, {4})));
}

// The gradient of an embedding is a scatter-add; its decomposition (one-hot rows times the
// gradient, what the compiler lowers it to) equals the eager kernel.
TEST(Derivatives, EmbeddingBackwardDecompositionMatchesEager) {
  manual_seed(12);
  Tensor g = randn({2, 3, 4});
  Tensor idx = from_vector({0, 5, 5, 2, 0, 5}, {2, 3}).to(DType::i64);
  ops::Attrs attrs = ops::ShapeAttrs{{6, 4}};
  Tensor eager = ops::call1(ops::OpId::embedding_backward, {g, idx}, attrs);
  Tensor lowered =
      ops::op_def(ops::OpId::embedding_backward).decompose(std::vector<Tensor>{g, idx}, attrs)[0];
  EXPECT_TRUE(allclose(eager, lowered, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(eager.slice(0, 1, 2), zeros({1, 4})));
}

}  // namespace
}  // namespace zc
