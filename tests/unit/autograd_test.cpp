// Eager autograd: the engine (accumulation, order, freed graphs), grad mode, leaves and
// modules, and the errors of misuse. The derivative rules themselves are checked against
// finite differences in derivatives_test.cpp.
#include <gtest/gtest.h>

#include "ops/dispatch.h"
#include "test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::contains;
using test::error_message;

Tensor vec(std::vector<float> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return from_vector(std::move(v), {n});
}

TEST(Autograd, ADiamondSumsBothPaths) {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = x * x + x;  // dy/dx = 2x + 1
  sum(y).backward();
  EXPECT_TRUE(allclose(x.grad(), vec({3, 5, 7})));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn_name(), "add");
  EXPECT_TRUE(y.requires_grad());
}

TEST(Autograd, GradientsAccumulateUntilCleared) {
  Tensor x = vec({1, 2}).requires_grad_();
  sum(x * 3.0).backward();
  sum(x * 3.0).backward();
  EXPECT_TRUE(allclose(x.grad(), vec({6, 6})));
  x.mutable_grad() = Tensor();
  sum(x * x).backward();
  EXPECT_TRUE(allclose(x.grad(), vec({2, 4})));
}

TEST(Autograd, ASecondBackwardThroughFreedValuesRaisesUnlessRetained) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor loss = sum(exp(x));
  loss.backward();
  std::string msg = error_message([&] { loss.backward(); });
  EXPECT_TRUE(contains(msg, "second time")) << msg;
  EXPECT_TRUE(contains(msg, "retain_graph")) << msg;

  Tensor z = vec({0, 0}).requires_grad_();
  Tensor kept = sum(exp(z));
  kept.backward({}, /*retain_graph=*/true);
  kept.backward();
  EXPECT_TRUE(allclose(z.grad(), vec({2, 2})));
}

TEST(Autograd, ANonScalarNeedsAGradientOfItsShape) {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = x * 2.0;
  std::string msg = error_message([&] { y.backward(); });
  EXPECT_TRUE(contains(msg, "one element")) << msg;
  msg = error_message([&] { y.backward(vec({1, 1})); });
  EXPECT_TRUE(contains(msg, "shape [2]")) << msg;
  y.backward(vec({1, 0, -1}));
  EXPECT_TRUE(allclose(x.grad(), vec({2, 0, -2})));
}

TEST(Autograd, OnlyFloatingLeavesCanRequireGradients) {
  std::string msg = error_message([] { arange(3).requires_grad_(); });
  EXPECT_TRUE(contains(msg, "floating-point")) << msg;
  Tensor x = vec({1}).requires_grad_();
  Tensor y = x * 2.0;
  msg = error_message([&] { y.requires_grad_(); });
  EXPECT_TRUE(contains(msg, "'mul'")) << msg;
  EXPECT_TRUE(y.detach().requires_grad_().requires_grad());
  msg = error_message([] { vec({1}).backward(); });
  EXPECT_TRUE(contains(msg, "does not require a gradient")) << msg;
}

TEST(Autograd, NoGradGuardRecordsNothingAndRestores) {
  Tensor x = vec({1, 2}).requires_grad_();
  {
    NoGradGuard guard;
    EXPECT_FALSE(GradMode::is_enabled());
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    { NoGradGuard nested; }
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor d = (x * 3.0).detach();
  EXPECT_FALSE(d.requires_grad());
  sum(d * x).backward();  // d is a constant here
  EXPECT_TRUE(allclose(x.grad(), vec({3, 6})));
}

TEST(Autograd, GradientsTakeTheirLeafsDtype) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor w = from_vector({0.5f, 0.25f}, {2}).to(DType::f64);
  Tensor y = sum(x * w);  // promoted to f64
  EXPECT_EQ(y.dtype(), DType::f64);
  y.backward();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_TRUE(allclose(x.grad(), vec({0.5f, 0.25f})));
}

TEST(Autograd, ComparisonsAndIndicesCarryNoGradient) {
  Tensor x = vec({1, -2}).requires_grad_();
  EXPECT_FALSE(gt(x, 0.0).requires_grad());
  EXPECT_FALSE(argmax(x).requires_grad());
  EXPECT_TRUE(x.to(DType::f64).requires_grad());
}

TEST(Autograd, AnOpWithoutARuleRaisesNamingItOnlyWhenAGradientGoesThroughIt) {
  Tensor g = randn({2, 3}).requires_grad_();
  Tensor idx = from_vector({0, 1}, {2}).to(DType::i64);
  Tensor table = ops::call1(ops::OpId::embedding_backward, {g, idx}, ops::ShapeAttrs{{4, 3}});
  EXPECT_TRUE(table.requires_grad());
  std::string msg = error_message([&] { sum(table).backward(); });
  EXPECT_TRUE(contains(msg, "'embedding_backward'")) << msg;
  EXPECT_TRUE(contains(msg, "no derivative")) << msg;
}

TEST(Autograd, ValuesOverwrittenAfterTheForwardAreRefused) {
  Tensor w = vec({1, 2}).requires_grad_();
  Tensor loss = sum(w * w);
  optim::SGD sgd({w}, {.lr = 0.1});
  sum(w).backward();  // some gradient, so step() changes w
  sgd.step();
  std::string msg = error_message([&] { loss.backward(); });
  EXPECT_TRUE(contains(msg, "overwritten")) << msg;
}

TEST(Autograd, ModuleParametersRequireGradientsAndZeroGradDropsThem) {
  manual_seed(3);
  auto lin = std::make_shared<nn::Linear>(4, 2);
  for (const Tensor& p : lin->parameters()) EXPECT_TRUE(p.requires_grad());
  sum((*lin)(randn({3, 4}))).backward();
  EXPECT_EQ(lin->weight.grad().shape(), (Shape{2, 4}));
  EXPECT_TRUE(allclose(lin->bias.grad(), from_vector({3.0f, 3.0f}, {2})));
  lin->zero_grad();
  EXPECT_FALSE(lin->weight.grad().defined());
  lin->to(DType::f64);  // converted in place: still a leaf that requires a gradient
  EXPECT_TRUE(lin->weight.requires_grad());
  EXPECT_TRUE(lin->weight.is_leaf());
  EXPECT_EQ(lin->weight.dtype(), DType::f64);
}

// The whole model, eagerly: the gpt model's embeddings, layer norms, attention and
// cross_entropy all have gradients.
TEST(Autograd, EveryGptParameterGetsAGradient) {
  manual_seed(4);
  models::GPTConfig cfg{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .d_model = 8};
  auto model = models::gpt(cfg);
  Tensor tokens = randint(0, 11, {2, 6}, DType::i64);
  Tensor logits = (*model)(tokens);
  Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, 11}), tokens.reshape({-1}));
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().shape(), p.shape()) << name;
  }
}

}  // namespace
}  // namespace zc
