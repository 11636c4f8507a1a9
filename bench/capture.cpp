// Capture-stage figures: tracing seed64 into a graph, the per-call guard check, the whole
// compiled-call overhead on the guard-hit path, and region planning (which every start of an
// Auto-compiled module pays, warm or cold).
#include <benchmark/benchmark.h>

#include "capture/capture.h"
#include "capture/guards.h"
#include "ir/canonical.h"
#include "runtime/regions/plan.h"
#include "zc/zc.h"

namespace {

void BM_CaptureSeed64(benchmark::State& state) {
  auto m = zc::models::seed_model(64);
  zc::Tensor x = zc::randn({10, 10});
  for (auto _ : state) {
    auto cap = zc::capture::capture_module(*m, x, nullptr, true);
    benchmark::DoNotOptimize(cap.graph.nodes.data());
  }
}
BENCHMARK(BM_CaptureSeed64)->Unit(benchmark::kMillisecond);

void BM_CaptureAndHashSeed64(benchmark::State& state) {
  auto m = zc::models::seed_model(64);
  zc::Tensor x = zc::randn({10, 10});
  for (auto _ : state) {
    auto cap = zc::capture::capture_module(*m, x, nullptr, true);
    benchmark::DoNotOptimize(zc::ir::graph_hash(cap.graph));
  }
}
BENCHMARK(BM_CaptureAndHashSeed64)->Unit(benchmark::kMillisecond);

// Finding the repeated blocks of a captured seed model of range(0) layers: hashing every
// region's subgraph and cutting the graph into calls and glue.
void BM_PlanRegionsSeed(benchmark::State& state) {
  auto m = zc::models::seed_model(state.range(0));
  zc::Tensor x = zc::randn({10, 10});
  auto cap = zc::capture::capture_module(*m, x, nullptr, true);
  for (auto _ : state) {
    auto plan = zc::runtime::plan_regions(cap.graph, {});
    benchmark::DoNotOptimize(plan.parts.data());
  }
}
BENCHMARK(BM_PlanRegionsSeed)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_GuardCheck(benchmark::State& state) {
  zc::Tensor x = zc::randn({10, 10});
  zc::capture::InputGuard g = zc::capture::input_guard(x);
  for (auto _ : state) {
    bool ok = zc::capture::guard_matches(g, zc::capture::input_guard_hash(x), x);
    benchmark::DoNotOptimize(ok);
  }
}
BENCHMARK(BM_GuardCheck)->Unit(benchmark::kNanosecond);

// A compiled call that does no work: guard check, argument binding and one executable run.
struct Identity : zc::nn::Module {
  zc::Tensor forward(const zc::Tensor& x) override { return x; }
};

void BM_CompiledCallOverhead(benchmark::State& state) {
  auto fast = zc::compile(std::make_shared<Identity>(), {.backend = "eager"});
  zc::Tensor x = zc::randn({10, 10});
  fast(x);
  for (auto _ : state) benchmark::DoNotOptimize(fast(x));
}
BENCHMARK(BM_CompiledCallOverhead)->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
