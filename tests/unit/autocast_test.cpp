// Mixed precision (zc/autocast.h): the policy's dtypes op by op, gradients that reach f32
// master weights in f32, compiled modules that equal eager autocast and keep calls with and
// without the scope apart, a gpt-small whose loss goes down trained under bf16 autocast, and
// f16 training with optim::GradScaler.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "capture/capture.h"
#include "ir/canonical.h"
#include "lower/autodiff.h"
#include "lower/pipeline.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

TEST(Autocast, OpsTakeThePolicysDtypes) {
  manual_seed(1);
  const Tensor a = randn({4, 8}), b = randn({8, 3}), d = randn({4, 8}, DType::f64);
  auto lin = std::make_shared<nn::Linear>(8, 3);
  {
    AutocastGuard bf16(DType::bf16);
    ASSERT_EQ(autocast_dtype(), DType::bf16);
    EXPECT_EQ(matmul(a, b).dtype(), DType::bf16);  // products in bf16
    EXPECT_EQ((*lin)(a).dtype(), DType::bf16);     // f32 weights cast, not changed
    EXPECT_EQ(lin->weight.dtype(), DType::f32);
    const Tensor p = matmul(a, b);
    EXPECT_EQ(softmax(p, -1).dtype(), DType::f32);  // exponentials and sums in f32
    EXPECT_EQ(sum(p).dtype(), DType::f32);
    EXPECT_EQ(exp(p).dtype(), DType::f32);
    EXPECT_EQ((p + randn({4, 3})).dtype(), DType::f32);  // promotion decides the rest
    EXPECT_EQ(relu(p).dtype(), DType::bf16);
    EXPECT_EQ(matmul(d, d.transpose(0, 1)).dtype(), DType::f64);  // f64 is left alone
    {
      AutocastGuard off;
      EXPECT_FALSE(autocast_dtype().has_value());
      EXPECT_EQ(matmul(a, b).dtype(), DType::f32);
    }
    EXPECT_EQ(autocast_dtype(), DType::bf16);
  }
  // The values: the product of the operands cast to bf16, as without the scope.
  Tensor got;
  {
    AutocastGuard bf16(DType::bf16);
    got = matmul(a, b);
  }
  EXPECT_TRUE(allclose(got.to(DType::f32),
                       matmul(a.to(DType::bf16), b.to(DType::bf16)).to(DType::f32), 0, 0));
  EXPECT_FALSE(autocast_dtype().has_value());
  EXPECT_EQ(matmul(a, b).dtype(), DType::f32);
  EXPECT_TRUE(
      test::contains(test::error_message([] { AutocastGuard bad(DType::f32); }), "bf16 or f16"));
}

// Products large enough for oneDNN's bf16 GEMM (where this CPU has one): the f32 product of
// the bf16 values, rounded to bf16 (sums in another order: within a bf16 rounding), for matmul
// with a transposed operand and for linear.
TEST(Autocast, LargeBf16ProductsEqualTheF32ProductOfTheirValues) {
  manual_seed(8);
  const Tensor a = randn({192, 256}), b = randn({160, 256});
  const Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
  const Tensor want = matmul(a16.to(DType::f32), b16.to(DType::f32).transpose(0, 1));
  Tensor got, lin;
  {
    AutocastGuard bf16(DType::bf16);
    got = matmul(a, b.transpose(0, 1));
    lin = linear(a, b);
  }
  ASSERT_EQ(got.dtype(), DType::bf16);
  EXPECT_TRUE(allclose(got.to(DType::f32), want, 1e-2, 1e-1));
  EXPECT_TRUE(allclose(lin.to(DType::f32), want, 1e-2, 1e-1));
}

// A linear layer's f32 weights under bf16 autocast: their gradients are f32 and near the f32
// layer's (bf16 rounding), and backward() itself runs without the policy.
TEST(Autocast, GradientsReachF32MasterWeights) {
  manual_seed(2);
  auto lin = std::make_shared<nn::Linear>(16, 8);
  const Tensor x = randn({32, 16}), target = randn({32, 8});
  auto grads = [&](bool autocast) {
    lin->zero_grad();
    std::optional<AutocastGuard> scope;
    if (autocast) scope.emplace(DType::bf16);
    Tensor loss = nn::functional::mse_loss((*lin)(x), target);
    EXPECT_EQ(loss.dtype(), DType::f32);
    loss.backward();
    return std::vector<Tensor>{lin->weight.grad(), lin->bias.grad()};
  };
  const std::vector<Tensor> low = grads(true), full = grads(false);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(low[i].defined());
    EXPECT_EQ(low[i].dtype(), DType::f32);
    EXPECT_TRUE(allclose(low[i], full[i], 3e-2, 3e-2)) << i;
  }
}

// A compiled gpt-small under bf16 autocast equals eager autocast (outputs and the parameters'
// gradients, within bf16's rounding), and the same compiled module called without the scope
// runs its f32 graph, not the autocast one.
TEST(Autocast, CompiledEqualsEagerAutocastAndKeepsCallsApart) {
  manual_seed(3);
  auto model = models::gpt(models::gpt_small_config(2));
  model->eval();
  CompiledModule fast = compile(model);
  const Tensor ids = randint(0, 100, {2, 16});
  auto run = [&](bool compiled, bool autocast) {
    model->zero_grad();
    std::optional<AutocastGuard> scope;
    if (autocast) scope.emplace(DType::bf16);
    Tensor y = compiled ? fast(ids) : (*model)(ids);
    scope.reset();
    sum(y.to(DType::f32)).backward();
    std::vector<Tensor> out{y.to(DType::f32)};
    for (const Tensor& p : model->parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const std::vector<Tensor> eager = run(false, true), compiled = run(true, true);
  ASSERT_EQ(eager.size(), compiled.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    const double scale = max(abs(eager[i])).item<double>() + 1e-6;
    EXPECT_LT(max(abs(compiled[i] - eager[i])).item<double>() / scale, 2e-2) << "tensor " << i;
  }
  // The logits come from a product: bf16 under the scope, f32 without, from one module.
  const Tensor f32 = fast(ids);
  EXPECT_EQ(f32.dtype(), DType::f32);
  EXPECT_TRUE(allclose(f32, (*model)(ids), 1e-4, 1e-4));
  {
    AutocastGuard bf16(DType::bf16);
    const Tensor low = fast(ids);
    EXPECT_EQ(low.dtype(), DType::bf16);
    EXPECT_TRUE(allclose(low.to(DType::f32), eager[0], 2e-2, 2e-2));
  }
  EXPECT_EQ(fast(ids).dtype(), DType::f32);
}

// Training gpt-small compiled under bf16 autocast with AdamW on its f32 weights: the loss goes
// down.
TEST(Autocast, ALossGoesDownTrainingGptSmallInBf16) {
  manual_seed(4);
  auto model = models::gpt(models::gpt_small_config(2));
  model->eval();  // no dropout: the losses compare steps, not masks
  CompiledModule fast = compile(model);
  optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.0});
  const Tensor ids = randint(0, 100, {4, 17});
  const Tensor inputs = ids.slice(1, 0, 16), targets = ids.slice(1, 1, 17);
  std::vector<double> losses;
  for (int step = 0; step < 12; ++step) {
    Tensor loss;
    {
      AutocastGuard bf16(DType::bf16);
      const Tensor logits = fast(inputs);
      loss = nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                           targets.reshape({-1}));
    }
    EXPECT_EQ(loss.dtype(), DType::f32);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << losses.front() << " -> " << losses.back();
  for (const Tensor& p : model->parameters()) EXPECT_EQ(p.dtype(), DType::f32);
}

// Lowering and deriving are functions of the graph alone: under a caller's autocast scope they
// make the graphs they make without one (decompositions and derivative rules call ops, which
// the scope would otherwise cast; eager backward() and the ops' own kernels do not).
TEST(Autocast, LoweringAndDerivingIgnoreTheCallersScope) {
  manual_seed(7);
  const std::vector<Tensor> in{randn({2, 4, 8}), randn({2, 4, 8}), randn({2, 4, 8})};
  capture::Captured cap = capture::capture_function(in, [&] {
    return std::vector<Tensor>{
        sum(scaled_dot_product_attention(in[0], in[1], in[2], true) * in[0]) +
        sum(matmul(in[0], in[1].transpose(-1, -2)))};
  });
  const std::vector<size_t> wrt{0, 1, 2};
  auto hashes = [&] {
    lower::LowerContext lc;
    return std::pair{ir::graph_hash(lower::lower(cap.graph, lc)),
                     ir::graph_hash(lower::joint_graph(cap.graph, wrt).graph)};
  };
  const auto plain = hashes();
  AutocastGuard bf16(DType::bf16);
  EXPECT_EQ(hashes(), plain);
}

// The scaler's gradients, unscaled, are the loss's own (the scale is a power of two: exact);
// an infinite gradient skips the step and halves the scale; growth_interval good steps double
// it.
TEST(GradScaler, UnscalesSkipsBacksOffAndGrows) {
  manual_seed(5);
  auto lin = std::make_shared<nn::Linear>(4, 2);
  optim::SGD opt(lin->parameters(), {.lr = 0.1});
  optim::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 2});
  const Tensor x = randn({8, 4}), target = randn({8, 2});
  auto loss = [&] { return nn::functional::mse_loss((*lin)(x), target); };
  opt.zero_grad();
  loss().backward();
  const Tensor want = lin->weight.grad().clone();
  opt.zero_grad();
  scaler.scale(loss()).backward();
  EXPECT_TRUE(allclose(lin->weight.grad(), want * 1024.0, 1e-6, 0));
  EXPECT_TRUE(scaler.unscale_(opt));
  EXPECT_TRUE(allclose(lin->weight.grad(), want, 0, 0));
  const Tensor before = lin->weight.clone();
  EXPECT_TRUE(scaler.step(opt));  // unscaled once, not twice
  EXPECT_TRUE(allclose(lin->weight, before - want * 0.1, 1e-6, 1e-7));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  // An infinite gradient: no step, the scale halves.
  opt.zero_grad();
  scaler.scale(loss()).backward();
  lin->bias.mutable_grad() = full({2}, INFINITY);
  const Tensor kept = lin->weight.clone();
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_TRUE(allclose(lin->weight, kept, 0, 0));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 512.0);
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    scaler.scale(loss()).backward();
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
  }
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_TRUE(test::contains(test::error_message([] { optim::GradScaler({.init_scale = 0}); }),
                             "init_scale > 0"));
}

// f16 autocast with the scaler on a small MLP of f32 weights: the loss goes down.
TEST(Autocast, F16TrainingWithTheGradScalerLowersTheLoss) {
  manual_seed(6);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(16, 32));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(32, 4));
  CompiledModule fast = compile(model);
  optim::AdamW opt(model->parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  optim::GradScaler scaler;
  const Tensor x = randn({64, 16}), target = randn({64, 4});
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) {
    Tensor loss;
    {
      AutocastGuard f16(DType::f16);
      loss = nn::functional::mse_loss(fast(x), target);
    }
    opt.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    losses.push_back(loss.item<double>());
  }
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << losses.front() << " -> " << losses.back();
}

}  // namespace
}  // namespace zc
