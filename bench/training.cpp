// Training-step figures on the CPU: one AdamW step of seed64 (forward, mse_loss, backward,
// optimizer), eager, and compiled (the model compiled, so its backward too, and the fused
// AdamW update). Run with --benchmark_format=json for JSON. The compiled step's graphs are
// compiled (or loaded from the cache) during the first, untimed step.
#include <benchmark/benchmark.h>

#include "zc/zc.h"

namespace {

struct Step {
  explicit Step(bool compiled)
      : fast(zc::compile(model)), opt(model->parameters(), {.lr = 1e-3, .fused = compiled}) {}
  std::shared_ptr<zc::nn::Module> model = zc::models::seed_model(64);
  zc::CompiledModule fast;
  zc::optim::AdamW opt;
  zc::Tensor x = zc::randn({10, 10}), target = zc::randn({10, 10});

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
  Step s(compiled);
  s.run(compiled);
  for (auto _ : state) s.run(compiled);
}
BENCHMARK_CAPTURE(BM_Seed64TrainStep, Eager, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Seed64TrainStep, Compiled, true)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
