// Losses and optimizers: values against formulas written out by hand, gradients of the losses,
// the optimizers' updates step by step, and saving and resuming their state.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tensor/assign.h"
#include "test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::contains;
using test::error_message;
namespace F = nn::functional;

TEST(Losses, MseLossAndItsGradient) {
  Tensor a = from_vector({1, 2, 4}, {3}).requires_grad_();
  Tensor b = from_vector({0, 2, 1}, {3});
  Tensor loss = F::mse_loss(a, b);
  EXPECT_NEAR(loss.item<double>(), (1.0 + 0.0 + 9.0) / 3, 1e-6);
  loss.backward();
  EXPECT_TRUE(allclose(a.grad(), from_vector({2.0f / 3, 0, 2.0f}, {3})));  // 2 (a - b) / n
  std::string msg = error_message([&] { F::mse_loss(a, from_vector({1, 2}, {2})); });
  EXPECT_TRUE(contains(msg, "same shape")) << msg;
}

TEST(Losses, CrossEntropyIsTheMeanNegativeLogLikelihood) {
  Tensor logits = from_vector({1, 2, 3, 0, 0, 5}, {2, 3}).requires_grad_();
  Tensor targets = from_vector({2, 0}, {2}).to(DType::i64);
  Tensor loss = F::cross_entropy(logits, targets);
  auto lse = [](double a, double b, double c) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c));
  };
  double expected = ((lse(1, 2, 3) - 3) + (lse(0, 0, 5) - 0)) / 2;
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6);
  loss.backward();
  // (softmax - one_hot) / N
  Tensor p = softmax(logits.detach(), 1);
  Tensor one_hot = from_vector({0, 0, 1, 1, 0, 0}, {2, 3});
  EXPECT_TRUE(allclose(logits.grad(), (p - one_hot) / 2.0, 1e-5, 1e-7));
}

TEST(Losses, CrossEntropyIgnoresTheIgnoreIndex) {
  Tensor logits = from_vector({1, 2, 3, 0, 0, 5, 2, 2, 2}, {3, 3}).requires_grad_();
  Tensor targets = from_vector({2, -100, 1}, {3}).to(DType::i64);
  Tensor loss = F::cross_entropy(logits, targets);
  double l0 = std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3;
  double l2 = std::log(3.0);
  EXPECT_NEAR(loss.item<double>(), (l0 + l2) / 2, 1e-6);
  loss.backward();
  EXPECT_TRUE(allclose(logits.grad().select(0, 1), zeros({3})));
  // ignore_index may be a class id too: then rows of that class are the ones left out.
  Tensor classes = from_vector({2, 0, 1}, {3}).to(DType::i64);
  EXPECT_NEAR(F::cross_entropy(logits.detach(), classes, 0).item<double>(), (l0 + l2) / 2, 1e-6);
}

TEST(Losses, CrossEntropyRefusesBadTargets) {
  Tensor logits = randn({2, 3});
  std::string msg = error_message([&] {
    F::cross_entropy(logits, from_vector({0, 3}, {2}).to(DType::i64));
  });
  EXPECT_TRUE(contains(msg, "target 3")) << msg;
  msg = error_message([&] { F::cross_entropy(logits, from_vector({0, 1}, {2})); });
  EXPECT_TRUE(contains(msg, "integer targets")) << msg;
  msg = error_message([&] { F::cross_entropy(randn({2, 2, 3}), zeros({2, 2}, DType::i64)); });
  EXPECT_TRUE(contains(msg, "reshape")) << msg;
  // One sample: logits [C], a 0-dim target.
  Tensor one = F::cross_entropy(from_vector({0, 0}, {2}), scalar_tensor(1, DType::i64));
  EXPECT_NEAR(one.item<double>(), std::log(2.0), 1e-6);
}

// w' = w - lr (g + wd w) on the first step; then the momentum buffer b = m b + g.
TEST(Optim, SgdWithMomentumAndWeightDecayFollowsTorch) {
  Tensor w = from_vector({1.0f}, {1}).requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  double ref = 1.0, buf = 0.0;
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    sum(w * w * 0.5).backward();  // g = w
    double g = ref + 0.01 * ref;
    buf = step == 0 ? g : 0.9 * buf + g;
    ref -= 0.1 * buf;
    sgd.step();
    EXPECT_NEAR(w.item<double>(), ref, 1e-6) << "step " << step;
  }
}

TEST(Optim, AdamWFollowsTorch) {
  Tensor w = from_vector({1.0f, -2.0f}, {2}).requires_grad_();
  optim::AdamW adam({w}, {.lr = 0.01, .betas = {0.9, 0.99}, .eps = 1e-8, .weight_decay = 0.1});
  double p[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  for (int t = 1; t <= 4; ++t) {
    adam.zero_grad();
    sum(w * w * w).backward();  // g = 3 w^2
    for (int i = 0; i < 2; ++i) {
      double g = 3 * p[i] * p[i];
      p[i] *= 1 - 0.01 * 0.1;
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.99 * v[i] + 0.01 * g * g;
      double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.99, t));
      p[i] -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
    }
    adam.step();
    EXPECT_NEAR(w.data<float>()[0], p[0], 1e-5) << "step " << t;
    EXPECT_NEAR(w.data<float>()[1], p[1], 1e-5) << "step " << t;
  }
}

// Four AdamW steps of seed_model(layers) on a fixed regression, eager or fused;
// `before_step(step, model)` runs after each backward, before the optimizer's step. Returns the
// parameters.
std::vector<Tensor> adamw_steps(bool fused, uint64_t seed, int layers,
                                const std::function<void(int, nn::Module&)>& before_step) {
  manual_seed(seed);
  auto model = models::seed_model(layers);
  optim::AdamW opt(model->parameters(), {.lr = 1e-2, .weight_decay = 0.1, .fused = fused});
  Tensor x = randn({10, 10}), y = randn({10, 10});
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    F::mse_loss((*model)(x), y).backward();
    before_step(step, *model);
    opt.step();
  }
  return model->parameters();
}

void expect_same_parameters(const std::vector<Tensor>& fused, const std::vector<Tensor>& eager) {
  ASSERT_EQ(fused.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_TRUE(allclose(fused[i], eager[i], 1e-5, 1e-6))
        << "parameter " << i << ": max difference " << max(abs(fused[i] - eager[i])).item<double>();
  }
}

// The fused update (one compiled graph for every parameter) computes what the eager one does;
// a step it cannot fuse (a parameter without a gradient) runs eagerly.
TEST(Optim, FusedAdamWEqualsEager) {
  auto drop_a_gradient = [](int step, nn::Module& model) {
    if (step == 2) model.parameters()[0].mutable_grad() = Tensor();  // not fusable
  };
  expect_same_parameters(adamw_steps(true, 23, 4, drop_a_gradient),
                         adamw_steps(false, 23, 4, drop_a_gradient));
}

// The fused step moves the parameters into one flat tensor once (each handle then shows its
// part, so the next steps read them without a copy); a parameter replaced afterwards (a
// reloaded weight) is packed again and its new values are used, as the eager step uses them.
TEST(Optim, FusedAdamWPacksTheParametersAndRepacksAReplacedOne) {
  std::vector<Tensor> packed;
  auto record_and_replace = [&](int step, nn::Module& model) {
    if (step == 1) packed = model.parameters();  // after the first step
    if (step == 2) replace_contents(model.parameters()[2], model.parameters()[2] * 0.5);
  };
  std::vector<Tensor> fused = adamw_steps(true, 24, 3, record_and_replace);
  ASSERT_FALSE(packed.empty());
  // After the first step, the parameters lay end to end in one storage, in order.
  for (size_t i = 0; i < packed.size(); ++i) {
    EXPECT_EQ(packed[i].unsafe_impl()->storage, packed[0].unsafe_impl()->storage) << i;
    if (i > 0) {
      EXPECT_EQ(packed[i].storage_offset(), packed[i - 1].storage_offset() + packed[i - 1].numel());
    }
  }
  expect_same_parameters(fused, adamw_steps(false, 24, 3, record_and_replace));
}

TEST(Optim, ParametersWithoutGradientsAreSkippedAndMisuseRaises) {
  Tensor a = from_vector({1.0f}, {1}).requires_grad_();
  Tensor b = from_vector({1.0f}, {1}).requires_grad_();
  optim::AdamW adam({a, b});
  sum(a * 2.0).backward();
  adam.step();
  EXPECT_NE(a.item<double>(), 1.0);
  EXPECT_EQ(b.item<double>(), 1.0);
  std::string msg = error_message([] { optim::SGD({from_vector({1.0f}, {1})}); });
  EXPECT_TRUE(contains(msg, "does not require a gradient")) << msg;
  msg = error_message([&] { optim::SGD({a * 2.0}); });
  EXPECT_TRUE(contains(msg, "'mul'")) << msg;
  msg = error_message([] { optim::AdamW({}); });
  EXPECT_TRUE(contains(msg, "empty")) << msg;
  msg = error_message([&] { optim::AdamW({a}, {.betas = {1.0, 0.9}}); });
  EXPECT_TRUE(contains(msg, "betas")) << msg;
}

// A small regression trained eagerly: 20 steps, save model and optimizer, 20 more; a second
// run loads both after 20 and must reproduce the last 20 losses exactly.
void resumed_run_continues_the_same_curve(bool fused) {
  const std::string dir = test::fresh_dir("optim", fused ? "resume-fused" : "resume");
  auto make = [] {
    manual_seed(21);
    auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Linear>(16, 1)});
    return net;
  };
  manual_seed(22);
  Tensor x = randn({32, 4});
  Tensor y = sum(x * from_vector({1, -2, 0.5, 3}, {4}), {1}, true);
  auto train = [&](nn::Module& net, optim::Optimizer& opt, int steps) {
    std::vector<double> losses;
    for (int i = 0; i < steps; ++i) {
      opt.zero_grad();
      Tensor loss = F::mse_loss(net(x), y);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  auto net = make();
  optim::AdamW opt(net->parameters(), {.lr = 0.01, .fused = fused});
  std::vector<double> first = train(*net, opt, 20);
  nn::save_safetensors(*net, dir + "/model.safetensors");
  opt.save(dir + "/optim.safetensors");
  std::vector<double> rest = train(*net, opt, 20);
  EXPECT_LT(rest.back(), first.front() * 0.5) << "the loss did not go down";

  auto again = make();
  nn::load_safetensors(*again, dir + "/model.safetensors");
  optim::AdamW resumed(again->parameters(), {.lr = 0.5, .fused = fused});  // the file's lr wins
  resumed.load(dir + "/optim.safetensors");
  EXPECT_EQ(resumed.options.lr, 0.01);
  std::vector<double> continued = train(*again, resumed, 20);
  EXPECT_EQ(continued, rest);

  // Another optimizer's state, or state for other parameters, is refused.
  optim::SGD sgd(again->parameters());
  std::string msg = error_message([&] { sgd.load(dir + "/optim.safetensors"); });
  EXPECT_TRUE(contains(msg, "no SGD state")) << msg;
  Tensor lone = zeros({3}).requires_grad_();
  optim::AdamW other({lone});
  msg = error_message([&] { other.load(dir + "/optim.safetensors"); });
  EXPECT_TRUE(contains(msg, "4 parameters")) << msg;
}

TEST(Optim, AResumedRunContinuesTheSameCurve) {
  resumed_run_continues_the_same_curve(false);
}

TEST(Optim, AResumedFusedRunContinuesTheSameCurve) {
  resumed_run_continues_the_same_curve(true);
}

}  // namespace
}  // namespace zc
