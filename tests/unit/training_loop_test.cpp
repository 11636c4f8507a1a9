// What a training loop needs around the optimizer: gradient clipping by the global norm,
// learning-rate schedules, the generator's state, and saving and resuming a run (model,
// optimizer, schedule, generator) so that it continues bit for bit, eagerly and compiled, with
// dropout drawing from the generator and gradients accumulated over micro-batches.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

Tensor param(const std::vector<float>& v) {
  Tensor p = from_vector(v, {static_cast<int64_t>(v.size())});
  p.requires_grad_();
  return p;
}

TEST(TrainingLoop, ClipGradNormScalesEveryGradientTogether) {
  Tensor a = param({0, 0}), b = param({0}), c = param({0});
  a.mutable_grad() = from_vector({3, 4}, {2});
  b.mutable_grad() = from_vector({12}, {1});  // c has no gradient: left out
  const Tensor norm = nn::clip_grad_norm_({a, b, c}, 6.5);
  EXPECT_FLOAT_EQ(norm.item<float>(), 13.0f);
  const float k = static_cast<float>(6.5 / (13.0 + 1e-6));
  EXPECT_TRUE(allclose(a.grad(), from_vector({3 * k, 4 * k}, {2}), 1e-6, 0));
  EXPECT_TRUE(allclose(b.grad(), from_vector({12 * k}, {1}), 1e-6, 0));
  EXPECT_FALSE(c.grad().defined());
  // Under the bound: unchanged. The infinity norm and p = 1.
  EXPECT_FLOAT_EQ(nn::clip_grad_norm_({a, b}, 100.0).item<float>(), 6.5f);
  EXPECT_TRUE(allclose(a.grad(), from_vector({3 * k, 4 * k}, {2}), 1e-6, 0));
  a.mutable_grad() = from_vector({3, -4}, {2});
  b.mutable_grad() = from_vector({2}, {1});
  EXPECT_FLOAT_EQ(nn::clip_grad_norm_({a, b}, 100.0, INFINITY).item<float>(), 4.0f);
  EXPECT_FLOAT_EQ(nn::clip_grad_norm_({a, b}, 100.0, 1.0).item<float>(), 9.0f);
  test::expect_error_containing([&] { nn::clip_grad_norm_({a}, -1.0); }, "max_norm >= 0");
  test::expect_error_containing([&] { nn::clip_grad_norm_({a}, 1.0, 0.0); }, "norm_type > 0");
}

TEST(TrainingLoop, SchedulesSetTheOptimizersLearningRate) {
  Tensor p = param({1});
  optim::AdamW opt({p}, {.lr = 0.1});
  optim::WarmupCosine s(opt, {.warmup_steps = 4, .total_steps = 12, .min_factor = 0.1});
  std::vector<double> got{opt.lr()};
  for (int i = 0; i < 14; ++i) {
    s.step();
    got.push_back(opt.lr());
  }
  for (int64_t step = 0; step <= 14; ++step) {
    const double want =
        step < 4
            ? 0.1 * step / 4.0
            : 0.1 * (0.1 + 0.9 * 0.5 *
                               (1 + std::cos(std::numbers::pi * std::min(1.0, (step - 4) / 8.0))));
    EXPECT_NEAR(got[static_cast<size_t>(step)], want, 1e-12) << "step " << step;
  }
  EXPECT_EQ(s.last_step(), 14);
  EXPECT_DOUBLE_EQ(s.last_lr(), 0.1 * 0.1);  // the floor after total_steps
  optim::SGD sgd({p}, {.lr = 2.0});
  optim::LambdaLR l(sgd, [](int64_t step) { return 1.0 / (1 + step); });
  EXPECT_DOUBLE_EQ(sgd.lr(), 2.0);
  l.step();
  l.step();
  EXPECT_DOUBLE_EQ(sgd.lr(), 2.0 / 3);
  test::expect_error_containing(
      [&] { optim::WarmupCosine(opt, {.warmup_steps = 5, .total_steps = 4}); },
      "warmup_steps <= total_steps");
  test::expect_error_containing([&] { opt.set_lr(-1); }, "learning rate >= 0");
}

TEST(TrainingLoop, TheGeneratorsStateRepeatsItsDraws) {
  manual_seed(5);
  (void)randn({7});
  const Tensor s = rng_state();
  const Tensor a = randn({100}), ai = randint(0, 1000, {10});
  (void)randn({3});
  set_rng_state(s);
  EXPECT_TRUE(allclose(randn({100}), a, 0, 0));
  EXPECT_TRUE(allclose(randint(0, 1000, {10}), ai, 0, 0));
  test::expect_error_containing([] { set_rng_state(zeros({3}, DType::i64)); },
                                "tensor rng_state() returns");
}

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> l1 = register_module("l1", std::make_shared<nn::Linear>(8, 16));
  std::shared_ptr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.2));
  std::shared_ptr<nn::Linear> l2 = register_module("l2", std::make_shared<nn::Linear>(16, 1));
  Tensor forward(const Tensor& x) override { return (*l2)((*drop)(relu((*l1)(x)))); }
};

// One run of `steps` steps from `from` (0: a fresh start), each of two micro-batches whose
// gradients accumulate, clipped, with a warmup-cosine schedule; the data and the dropout masks
// come from the generator. With `save_at`, the state is saved after that many steps.
struct TrainingRun {
  std::shared_ptr<Net> net;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::WarmupCosine> schedule;
  explicit TrainingRun(uint64_t init_seed) {
    manual_seed(init_seed);
    net = std::make_shared<Net>();
    opt = std::make_unique<optim::AdamW>(net->parameters(), optim::AdamWOptions{.lr = 0.01});
    schedule = std::make_unique<optim::WarmupCosine>(
        *opt, optim::WarmupCosineOptions{.warmup_steps = 2, .total_steps = 8});
  }
  void steps(int64_t n, bool compiled) {
    CompiledModule c = compile(net);
    for (int64_t s = 0; s < n; ++s) {
      opt->zero_grad();
      for (int micro = 0; micro < 2; ++micro) {
        const Tensor x = randn({4, 8}), y = randn({4, 1});
        const Tensor out = compiled ? c(x) : (*net)(x);
        mean((out - y) * (out - y)).backward();
      }
      nn::clip_grad_norm_(net->parameters(), 0.5);
      opt->step();
      schedule->step();
    }
  }
};

TEST(TrainingLoop, AResumedRunEqualsAnUninterruptedOneBitForBit) {
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    const std::string dir = test::test_dir("training_state") + (compiled ? "/c" : "/e");
    TrainingRun whole(1);
    whole.steps(6, compiled);
    TrainingRun first(1);
    first.steps(3, compiled);
    save_training_state(dir, *first.net, *first.opt, first.schedule.get());
    // A new process: other initial weights, another seed, then the saved state.
    TrainingRun resumed(99);
    (void)randn({17});
    load_training_state(dir, *resumed.net, *resumed.opt, resumed.schedule.get());
    EXPECT_EQ(resumed.schedule->last_step(), 3);
    resumed.steps(3, compiled);
    const auto want = whole.net->named_parameters(), got = resumed.net->named_parameters();
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(allclose(got[i].second, want[i].second, 0, 0)) << want[i].first;
    EXPECT_DOUBLE_EQ(resumed.opt->lr(), whole.opt->lr());
  }
}

TEST(TrainingLoop, ResumingFromWhatDoesNotFitIsAnError) {
  TrainingRun r(1);
  const std::string dir = test::test_dir("training_state");
  test::expect_error_containing(
      [&] { load_training_state(dir + "/none", *r.net, *r.opt, r.schedule.get()); },
      "model.safetensors does not exist");
  save_training_state(dir, *r.net, *r.opt);  // no schedule
  test::expect_error_containing([&] { load_training_state(dir, *r.net, *r.opt, r.schedule.get()); },
                                "holds no learning-rate schedule");
}

}  // namespace
}  // namespace zc
