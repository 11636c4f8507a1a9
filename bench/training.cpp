// Training-step figures on the CPU: one AdamW step (forward, mse_loss, backward, optimizer) of
// seed64 and of a 16-block MLP (activations [64, 32], each block Linear 32->64, ReLU, Linear
// 64->32, issue 60's small model), eager, and compiled (the model compiled, so its backward
// too, and the fused AdamW update). Run with --benchmark_format=json for JSON. The compiled step's
// graphs are compiled (or loaded from the cache) during the first, untimed step. BM_Seed64Call
// times one compiled call alone, with gradients wanted and without.
#include <benchmark/benchmark.h>

#include <optional>

#include "zc/zc.h"

namespace {

std::shared_ptr<zc::nn::Module> mlp16() {
  auto m = std::make_shared<zc::nn::Sequential>();
  for (int i = 0; i < 16; ++i) {
    auto block = std::make_shared<zc::nn::Sequential>();
    block->push_back(std::make_shared<zc::nn::Linear>(32, 64));
    block->push_back(std::make_shared<zc::nn::ReLU>());
    block->push_back(std::make_shared<zc::nn::Linear>(64, 32));
    m->push_back(block);
  }
  return m;
}

struct Step {
  Step(bool compiled, std::shared_ptr<zc::nn::Module> m, zc::Shape shape)
      : model(std::move(m)),
        fast(zc::compile(model)),
        opt(model->parameters(), {.lr = 1e-3, .fused = compiled}),
        x(zc::randn(shape)),
        target(zc::randn(shape)) {}
  std::shared_ptr<zc::nn::Module> model;
  zc::CompiledModule fast;
  zc::optim::AdamW opt;
  zc::Tensor x, target;

  void run(bool compiled) {
    zc::Tensor y = compiled ? fast(x) : (*model)(x);
    zc::Tensor loss = zc::nn::functional::mse_loss(y, target);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
};

void BM_Seed64TrainStep(benchmark::State& state, bool compiled) {
  zc::manual_seed(0);
  Step s(compiled, zc::models::seed_model(64), {10, 10});
  s.run(compiled);
  for (auto _ : state) s.run(compiled);
}
BENCHMARK_CAPTURE(BM_Seed64TrainStep, Eager, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Seed64TrainStep, Compiled, true)->Unit(benchmark::kMicrosecond);

// One compiled call of seed64 alone (no loss, backward or update): with gradients wanted (the
// training forward, its saved values and the backward node) against under NoGradGuard (the
// inference graph): what wanting gradients adds to a call.
void BM_Seed64Call(benchmark::State& state, bool gradients) {
  zc::manual_seed(0);
  auto model = zc::models::seed_model(64);
  zc::CompiledModule fast = zc::compile(model);
  const zc::Tensor x = zc::randn({10, 10});
  std::optional<zc::NoGradGuard> no_grad;
  if (!gradients) no_grad.emplace();
  fast(x);
  for (auto _ : state) benchmark::DoNotOptimize(fast(x));
}
BENCHMARK_CAPTURE(BM_Seed64Call, GradientsWanted, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Seed64Call, NoGrad, false)->Unit(benchmark::kMicrosecond);

void BM_Mlp16TrainStep(benchmark::State& state, bool compiled) {
  zc::manual_seed(0);
  Step s(compiled, mlp16(), {64, 32});
  s.run(compiled);
  for (auto _ : state) s.run(compiled);
}
BENCHMARK_CAPTURE(BM_Mlp16TrainStep, Eager, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mlp16TrainStep, Compiled, true)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
