// Random numbers in compiled code: rand_like is an op whose seed each call draws (ops/
// random_like.cpp), so a compiled nn::Dropout in training mode draws a new mask every call,
// its backward uses the forward's mask, generated code draws exactly what the eager kernel
// draws for the same seed, and manual_seed reproduces a compiled run.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/dispatch.h"
#include "ops/philox.h"
#include "runtime/call/compiled_function.h"
#include "test_support.h"
#include "unit/op_programs.h"
#include "unit/random_programs.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::Fn;

Tensor seed_tensor(int64_t s) {
  return from_values<int64_t>({s}, {});
}

std::vector<float> values_of(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

// The known answer: Philox4x32-10 of counter (0, 0, 0, 0) and key (0, 0) begins with
// 0x6627e8d5 (Random123's kat_vectors); the op's values are that generator's words.
TEST(RandLike, EagerValuesArePhiloxWordsOfEachIndex) {
  EXPECT_EQ(ops::philox_first_word(0, 0), 0x6627e8d5u);
  const Tensor x = zeros({3, 700});
  const int64_t seed = 0x1234567890abcdefLL;
  const std::vector<float> got =
      values_of(ops::call1(ops::OpId::rand_like, {x, seed_tensor(seed)}));
  ASSERT_EQ(got.size(), 2100u);
  double sum = 0;
  int below = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], ops::philox_uniform(static_cast<uint64_t>(seed), i)) << i;
    ASSERT_TRUE(got[i] >= 0.0f && got[i] < 1.0f) << got[i];
    sum += got[i];
    below += got[i] < 0.3f;
  }
  // Fixed seed, so fixed figures: the mean and a quantile where a uniform puts them.
  EXPECT_NEAR(sum / 2100, 0.5, 0.02);
  EXPECT_NEAR(below / 2100.0, 0.3, 0.02);
  // Another seed, other values; f64 and f16 draw the same numbers, converted.
  EXPECT_NE(values_of(ops::call1(ops::OpId::rand_like, {x, seed_tensor(seed + 1)})), got);
  const Tensor d = ops::call1(ops::OpId::rand_like, {x.to(DType::f64), seed_tensor(seed)});
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(values_of(d), got);
}

TEST(RandLike, NormalValuesAreBoxMullerOfTwoPhiloxWords) {
  const Tensor x = zeros({3, 7000});
  const int64_t seed = 99;
  const std::vector<float> got =
      values_of(ops::call1(ops::OpId::randn_like, {x, seed_tensor(seed)}));
  double sum = 0, squares = 0;
  int beyond_two = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], ops::philox_normal(static_cast<uint64_t>(seed), i)) << i;
    ASSERT_TRUE(std::isfinite(got[i]) && std::abs(got[i]) < 5.8f) << got[i];
    sum += got[i];
    squares += static_cast<double>(got[i]) * got[i];
    beyond_two += std::abs(got[i]) > 2.0f;
  }
  const double n = static_cast<double>(got.size());
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(squares / n, 1.0, 0.03);
  EXPECT_NEAR(beyond_two / n, 0.0455, 0.006);  // P(|z| > 2) of a standard normal
}

TEST(RandLike, BadOperandsAreRefused) {
  test::expect_error_containing(
      [] {
        ops::call1(ops::OpId::rand_like, {zeros({2}, DType::i64), seed_tensor(1)});
      },
      "floating");
  test::expect_error_containing(
      [] {
        ops::call1(ops::OpId::rand_like, {zeros({2}), zeros({1}, DType::i64)});
      },
      "0-dim int64");
  test::expect_error_containing([] { rand_like(Tensor()); }, "undefined");
}

// Generated code (the C++ backend: pointwise loops, a broadcast, a product's epilogue, a
// reduction's producer) against the interpreter, which runs the eager kernel, on the same
// seeds: manual_seed before each call makes both draw the same ones (a trace draws none). Bit
// for bit for the draws; the arithmetic around them within float rounding.
TEST(RandLike, GeneratedCodeDrawsWhatTheEagerKernelDraws) {
  manual_seed(41);
  const Tensor w = randn({6, 5});
  const std::vector<test::Program> programs = {
      [](const Tensor& x) { return rand_like(x); },
      [](const Tensor& x) {
        return rand_like(x.unsqueeze(1).expand({4, 3, 5})) + x.unsqueeze(1);
      },
      [=](const Tensor& x) { return dropout(linear(x, w), 0.4); },
      [](const Tensor& x) { return softmax(x + rand_like(x), 1) * rand_like(x); },
      [](const Tensor& x) { return rand_like(x.t()) * x.t().contiguous(); },
      [](const Tensor& x) { return randn_like(x); },
      [=](const Tensor& x) {
        return linear(x + randn_like(x) * 0.1, w) + randn_like(sum(x, {1}, true));
      },
  };
  for (size_t i = 0; i < programs.size(); ++i) {
    auto m = std::make_shared<Fn>(programs[i]);
    const Tensor x = randn({4, 5});
    NoGradGuard no_grad;
    manual_seed(7);
    const Tensor generated = compile(m, {.regions = Regions::None})(x);
    manual_seed(7);
    const Tensor interpreted = compile(m, {.backend = "eager"})(x);
    EXPECT_TRUE(allclose(generated, interpreted, 1e-6, 1e-6)) << "program " << i;
    if (i == 0 || i == 5) {
      EXPECT_EQ(values_of(generated), values_of(interpreted)) << "program " << i;
    }
  }
}

// The seed is an input of the graph: one compiled graph, a new draw per call, and manual_seed
// gives the same calls again.
TEST(CompiledDropout, EachCallDrawsItsOwnMaskAndManualSeedRepeatsThem) {
  manual_seed(3);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(16, 64));
  m->push_back(std::make_shared<nn::Dropout>(0.25));
  const Tensor x = randn({32, 16});
  NoGradGuard no_grad;
  const Tensor kept = (*(*m)[0])(x) * (1.0 / 0.75);  // what survives, scaled
  auto run = [&](CompiledModule& f) {
    std::vector<std::vector<float>> calls;
    for (int c = 0; c < 3; ++c) calls.push_back(values_of(f(x)));
    return calls;
  };
  manual_seed(9);
  CompiledModule fast = compile(m);
  const auto first = run(fast);
  const std::vector<float> full = values_of(kept);
  for (const std::vector<float>& y : first) {
    int dropped = 0;
    for (size_t e = 0; e < y.size(); ++e) {
      if (y[e] == 0.0f) {
        ++dropped;
      } else {
        ASSERT_NEAR(y[e], full[e], 1e-5 * (1 + std::abs(full[e])));
      }
    }
    EXPECT_NEAR(dropped / static_cast<double>(y.size()), 0.25, 0.03);
  }
  EXPECT_NE(first[0], first[1]);
  EXPECT_NE(first[1], first[2]);
  // A new compile after the same seed: the same three masks (a trace draws nothing).
  manual_seed(9);
  CompiledModule again = compile(m);
  EXPECT_EQ(run(again), first);
  // eval(): the identity, compiled too.
  m->eval();
  EXPECT_TRUE(allclose(compile(m)(x), (*(*m)[0])(x), 1e-6, 1e-6));
}

// The compiled backward multiplies by the mask the forward drew (saved or recomputed from the
// seed): the gradient of sum(dropout(linear(x)) * g) w.r.t. x is (g * mask * scale) @ W, with
// the mask read off the forward's output.
TEST(CompiledDropout, TheBackwardUsesTheForwardsMask) {
  manual_seed(5);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(8, 24));
  m->push_back(std::make_shared<nn::Dropout>(0.5));
  m->push_back(std::make_shared<nn::ReLU>());
  const Tensor g = randn({6, 24});
  auto linear0 = std::dynamic_pointer_cast<nn::Linear>((*m)[0]);
  CompiledModule fast = compile(m);
  for (int call = 0; call < 3; ++call) {
    const Tensor x = randn({6, 8}).requires_grad_();
    const Tensor y = fast(x);
    sum(y * g).backward();
    Tensor want;
    {
      NoGradGuard no_grad;
      const Tensor open = cast(ne(y, 0.0), DType::f32);  // kept and positive
      want = matmul(g * open * 2.0, linear0->weight);
    }
    EXPECT_TRUE(allclose(x.grad(), want, 1e-5, 1e-5)) << "call " << call;
  }
}

// A repeated block with dropout compiled once (Regions::Auto): every layer draws its own mask.
TEST(CompiledDropout, EveryCopyOfARepeatedBlockDrawsItsOwnMask) {
  manual_seed(8);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    auto block = std::make_shared<nn::Sequential>();
    block->push_back(std::make_shared<nn::Dropout>(0.5));
    m->push_back(block);
  }
  const Tensor x = ones({64});
  NoGradGuard no_grad;
  // Four dropouts of ones: each element survives all four with 1/16, as 16.
  const std::vector<float> y = values_of(compile(m)(x));
  int survived = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || v == 16.0f) << v;
    survived += v != 0.0f;
  }
  // One mask repeated four times would keep half of them.
  EXPECT_LT(survived, 14);
}

// A trace that breaks runs its segments eagerly on every call: their rand_likes draw then.
TEST(CompiledDropout, SegmentsOfABrokenTraceDrawOnEveryCall) {
  auto m = std::make_shared<Fn>([](const Tensor& x) {
    const Tensor y = dropout(x, 0.5);
    const double kept = sum(ne(y, 0.0)).item<int64_t>();  // a graph break
    return y * kept + dropout(x, 0.5);
  });
  manual_seed(6);
  const Tensor x = ones({200});
  NoGradGuard no_grad;
  CompiledModule fast = compile(m);
  const std::vector<float> a = values_of(fast(x)), b = values_of(fast(x));
  EXPECT_NE(a, b);
  // Each element is 2 * kept or 0, plus 2 or 0: the two masks of a call are not one mask.
  int only_second = 0;
  for (float v : a) only_second += v == 2.0f;
  EXPECT_GT(only_second, 20);
}

// Sizes the code serves without a compile (a size template) draw from their own shape.
TEST(RandLike, CodeForManySizesDrawsAsTheEagerKernel) {
  auto m = std::make_shared<Fn>([](const Tensor& x) { return rand_like(x) * x; });
  NoGradGuard no_grad;
  CompiledModule fast = compile(m, {.dynamic = Dynamic::All});
  CompiledModule interpreted = compile(m, {.backend = "eager", .dynamic = Dynamic::All});
  for (int64_t rows : {3, 5, 9}) {
    manual_seed(rows);
    const Tensor x = randn({rows, 7});
    manual_seed(100 + rows);
    const Tensor a = fast(x);
    manual_seed(100 + rows);
    const Tensor b = interpreted(x);
    EXPECT_TRUE(allclose(a, b, 1e-6, 1e-6)) << rows << " rows";
  }
}

// The CUDA backend's generated code and eager kernel draw what the CPU's do for the same
// seeds; a compiled training step there uses the forward's mask in its backward.
TEST(RandLike, CudaDrawsWhatTheCpuDraws) {
  ZC_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  manual_seed(5);
  const Tensor on_cpu = rand_like(zeros({3, 1000}));
  manual_seed(5);
  const Tensor on_gpu = rand_like(zeros({3, 1000}, DType::f32, gpu));
  EXPECT_EQ(values_of(on_gpu.to(Device::cpu())), values_of(on_cpu));
  // Normal draws: CUDA's logf, sqrtf and cosf are within a few ulp of the C library's.
  manual_seed(6);
  const Tensor normal_cpu = randn_like(zeros({3, 1000}));
  manual_seed(6);
  const Tensor normal_gpu = randn_like(zeros({3, 1000}, DType::f32, gpu));
  EXPECT_TRUE(allclose(normal_gpu.to(Device::cpu()), normal_cpu, 1e-5, 1e-5));

  manual_seed(21);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(16, 32));
  m->push_back(std::make_shared<nn::Dropout>(0.3));
  m->push_back(std::make_shared<nn::Tanh>());
  const Tensor x = randn({8, 16});
  Tensor cpu_out, gpu_out;
  {
    NoGradGuard no_grad;
    manual_seed(77);
    cpu_out = compile(m)(x);
    m->to(gpu);
    manual_seed(77);
    gpu_out = compile(m)(x.to(gpu)).to(Device::cpu());
  }
  EXPECT_TRUE(allclose(gpu_out, cpu_out, 1e-5, 1e-5));
  const std::vector<float> a = values_of(cpu_out), b = values_of(gpu_out);
  for (size_t e = 0; e < a.size(); ++e) ASSERT_EQ(a[e] == 0.0f, b[e] == 0.0f) << e;

  auto linear0 = std::dynamic_pointer_cast<nn::Linear>((*m)[0]);
  CompiledModule fast = compile(m);
  const Tensor g = randn({8, 32}).to(gpu);
  for (int call = 0; call < 2; ++call) {
    const Tensor xg = randn({8, 16}).to(gpu).requires_grad_();
    const Tensor y = fast(xg);
    sum(y * g).backward();
    Tensor want;
    {
      NoGradGuard no_grad;
      // d tanh = 1 - y^2 where kept; the dropped elements are tanh(0) = 0 with a zero mask.
      const Tensor kept = cast(ne(y, 0.0), DType::f32);
      want = matmul(g * kept * (1.0 - y * y) * (1.0 / 0.7), linear0->weight);
    }
    EXPECT_TRUE(allclose(xg.grad().to(Device::cpu()), want.to(Device::cpu()), 1e-4, 1e-4))
        << "call " << call;
  }
}

// A GPT with nanoGPT's dropout (GPTConfig::dropout), trained compiled: on `device`, its loss
// and gradients against the interpreter on the CPU under one manual_seed (the same masks), then
// AdamW steps on one batch bring its loss down.
void expect_gpt_with_dropout_trains(Device device, double tol) {
  manual_seed(31);
  models::GPTConfig cfg{
      .vocab_size = 17, .block_size = 16, .n_layer = 2, .n_head = 4, .d_model = 32, .dropout = 0.1};
  auto model = models::gpt(cfg);
  const Tensor tokens = randint(0, 17, {3, 12});
  auto loss_of = [&](const CompiledModule& m, const Tensor& t) {
    Tensor logits = m(t.slice(1, 0, t.size(1) - 1));
    return nn::functional::cross_entropy(logits.reshape({-1, 17}),
                                         t.slice(1, 1, t.size(1)).reshape({-1}));
  };
  auto step = [&](CompiledModule& f, const Tensor& t) {
    model->zero_grad();
    manual_seed(32);
    Tensor loss = loss_of(f, t);
    loss.backward();
    std::vector<Tensor> r{loss};
    for (const Tensor& p : model->parameters()) r.push_back(p.grad());
    return test::on_cpu(r);
  };
  CompiledModule interpreted = compile(model, {.backend = "eager"});
  const std::vector<Tensor> want = step(interpreted, tokens);
  model->to(device);
  const Tensor on = tokens.to(device);
  CompiledModule fast = compile(model);
  const std::vector<Tensor> got = step(fast, on);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(allclose(got[i], want[i], tol, tol)) << (i == 0 ? "the loss" : "a gradient");
  }
  // Without dropout the same call gives another loss: the masks changed something.
  model->eval();
  const double without = loss_of(fast, on).to(Device::cpu()).item<double>();
  EXPECT_GT(std::abs(without - want[0].item<double>()), 1e-4);
  model->train();
  optim::AdamW opt(model->parameters(), {.lr = 1e-2});
  double first = 0, last = 0;
  for (int s = 0; s < 30; ++s) {
    opt.zero_grad();
    Tensor loss = loss_of(fast, on);
    loss.backward();
    opt.step();
    (s == 0 ? first : last) = loss.to(Device::cpu()).item<double>();
  }
  EXPECT_LT(last, first * 0.6) << first << " -> " << last;
}

TEST(CompiledDropout, AGptWithDropoutTrainsAsTheInterpreterDoes) {
  expect_gpt_with_dropout_trains(Device::cpu(), 1e-5);
}

TEST(CompiledDropout, AGptWithDropoutTrainsOnCuda) {
  ZC_SKIP_WITHOUT_GPU();
  expect_gpt_with_dropout_trains(Device::cuda(0), 1e-4);
}

// Noise drawn in forward() (a diffusion model's training loss: predict the noise added to the
// input), trained compiled: the loss and gradients equal the interpreter's under one
// manual_seed, and two calls draw two noises.
TEST(CompiledNoise, ANoisePredictionLossTrainsAsTheInterpreterDoes) {
  manual_seed(51);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(12, 32));
  mlp->push_back(std::make_shared<nn::Tanh>());
  mlp->push_back(std::make_shared<nn::Linear>(32, 12));
  auto loss_module = std::make_shared<Fn>([mlp](const Tensor& x) {
    const Tensor noise = randn_like(x);
    const Tensor noisy = x * 0.8 + noise * 0.6;
    return nn::functional::mse_loss((*mlp)(noisy), noise);
  });
  loss_module->register_module("mlp", mlp);
  const Tensor x = randn({16, 12});
  auto step = [&](CompiledModule& f) {
    mlp->zero_grad();
    manual_seed(52);
    const Tensor loss = f(x);
    loss.backward();
    std::vector<Tensor> r{loss};
    for (const Tensor& p : mlp->parameters()) r.push_back(p.grad());
    return r;
  };
  CompiledModule interpreted = compile(loss_module, {.backend = "eager"});
  CompiledModule fast = compile(loss_module);
  const std::vector<Tensor> want = step(interpreted), got = step(fast);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(allclose(got[i], want[i], 1e-5, 1e-5)) << i;
  NoGradGuard no_grad;
  EXPECT_NE(fast(x).item<double>(), fast(x).item<double>());
}

// A compiled function (the fused optimizers' kind) has no call that draws seeds: it refuses a
// draw by name instead of replaying one.
TEST(RandLike, ACompiledFunctionRefusesADraw) {
  runtime::CompiledFunction f(
      [](std::span<const Tensor> in) { return std::vector<Tensor>{in[0] + rand_like(in[0])}; });
  const Tensor x = zeros({4});
  test::expect_error_containing([&] { f(std::vector<Tensor>{x}); }, "rand_like");
}

TEST(CompiledDropout, PackagesAndAccuracyChecksSayWhyTheyDoNotApply) {
  manual_seed(4);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(4, 4));
  m->push_back(std::make_shared<nn::Dropout>(0.5));
  const Tensor x = randn({2, 4});
  NoGradGuard no_grad;
  test::expect_error_containing([&] { package::build(m, {{x}}); }, "eval()");
  compiler::reset_stats();
  CompileOptions options;
  options.accuracy_check.calls = 1;
  compile(m, options)(x);
  const std::vector<compiler::AccuracyReport> reports = compiler::accuracy_reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].passed);
  EXPECT_TRUE(test::contains(reports[0].note, "random")) << reports[0].note;
}

}  // namespace
}  // namespace zc
