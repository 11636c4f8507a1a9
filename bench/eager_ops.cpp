// Eager-mode figures: the baseline that compiled code is measured against. Run with
// --benchmark_format=json (or --benchmark_out=FILE --benchmark_out_format=json) for JSON.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "zc/zc.h"

namespace {

// Counters per call, turned into rates by Google Benchmark (per second of real time when
// UseRealTime is set, which matters because the kernels are multi-threaded).
void set_rate(benchmark::State& state, const char* name, double per_call) {
  state.counters[name] = benchmark::Counter(per_call, benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::OneK::kIs1000);
}

void BM_matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  zc::manual_seed(0);
  zc::Tensor a = zc::randn({n, n});
  zc::Tensor b = zc::randn({n, n});
  for (auto _ : state) {
    zc::Tensor c = zc::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_rate(state, "FLOP/s", 2.0 * n * n * n);
}
BENCHMARK(BM_matmul)->Arg(64)->Arg(256)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same product of f32 operands under bf16 autocast (zc/autocast.h): the operands cast to
// bf16 and, where the CPU has AVX-512 BF16 or AMX and the size pays, oneDNN's bf16 GEMM.
void BM_matmul_autocast_bf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  zc::manual_seed(0);
  zc::Tensor a = zc::randn({n, n});
  zc::Tensor b = zc::randn({n, n});
  zc::AutocastGuard bf16(zc::DType::bf16);
  for (auto _ : state) {
    zc::Tensor c = zc::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_rate(state, "FLOP/s", 2.0 * n * n * n);
}
BENCHMARK(BM_matmul_autocast_bf16)
    ->Arg(256)
    ->Arg(1024)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Arguments: rows, normalized width.
void BM_layer_norm(benchmark::State& state) {
  const int64_t rows = state.range(0), d = state.range(1);
  zc::manual_seed(0);
  zc::Tensor x = zc::randn({rows, d});
  zc::Tensor w = zc::randn({d});
  zc::Tensor b = zc::randn({d});
  for (auto _ : state) {
    zc::Tensor y = zc::layer_norm(x, {d}, w, b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  // Read x, write y; the weights are negligible.
  state.SetBytesProcessed(state.iterations() * 2 * rows * d * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * rows * d);
}
BENCHMARK(BM_layer_norm)
    ->Args({4 * 128, 256})
    ->Args({8 * 128, 768})
    ->ArgNames({"rows", "d"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Attention-score shaped: [batch * heads, T, T], softmax over the last dim.
void BM_softmax(benchmark::State& state) {
  const int64_t bh = state.range(0), t = state.range(1);
  zc::manual_seed(0);
  zc::Tensor x = zc::randn({bh, t, t});
  for (auto _ : state) {
    zc::Tensor y = zc::softmax(x, -1);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * bh * t * t * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * bh * t * t);
}
BENCHMARK(BM_softmax)
    ->Args({4 * 4, 128})
    ->ArgNames({"bh", "T"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The regional-compilation model: 64 small layers, so the figure is mostly per-op overhead.
void BM_seed64_forward(benchmark::State& state) {
  zc::manual_seed(0);
  auto model = zc::models::seed_model(64);
  model->eval();
  zc::Tensor x = zc::randn({10, 10});
  for (auto _ : state) {
    zc::Tensor y = (*model)(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations());  // forward calls
}
BENCHMARK(BM_seed64_forward)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A small GPT: 4 layers, d=256, 4 heads, T=128, batch 4, vocab 1024. Items are tokens.
void BM_gpt_forward(benchmark::State& state) {
  zc::manual_seed(0);
  auto model = zc::models::gpt(zc::models::gpt_small_config());
  model->eval();
  zc::Tensor tokens = zc::models::gpt_small_tokens();
  for (auto _ : state) {
    zc::Tensor logits = (*model)(tokens);
    benchmark::DoNotOptimize(logits.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * tokens.numel());
}
BENCHMARK(BM_gpt_forward)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
