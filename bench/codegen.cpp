// CPU backend figures: steady-state calls compiled vs eager (seed64, gpt-small), the cold
// compile of one seed64 Layer with each stage's share, and the inline-vs-BLAS matmul sweep
// that sets the scheduler's threshold. Run with --benchmark_out=FILE --benchmark_out_format=json.
#include <benchmark/benchmark.h>

#include <chrono>
#include <climits>

#include "capture/capture.h"
#include "codegen/backends/cpp/backend.h"
#include "runtime/driver/compile_graph.h"
#include "zc/zc.h"

namespace {

void BM_Seed64_Eager(benchmark::State& state) {
  zc::manual_seed(0);
  auto m = zc::models::seed_model(64);
  zc::Tensor x = zc::randn({10, 10});
  for (auto _ : state) benchmark::DoNotOptimize((*m)(x));
}
BENCHMARK(BM_Seed64_Eager)->Unit(benchmark::kMicrosecond);

void BM_Seed64_Compiled(benchmark::State& state) {
  zc::manual_seed(0);
  auto m = zc::models::seed_model(64);
  auto fast = zc::compile(m, {.regions = zc::Regions::None});
  zc::Tensor x = zc::randn({10, 10});
  fast(x);
  for (auto _ : state) benchmark::DoNotOptimize(fast(x));
}
BENCHMARK(BM_Seed64_Compiled)->Unit(benchmark::kMicrosecond);

void BM_GptSmall_Eager(benchmark::State& state) {
  zc::manual_seed(0);
  auto m = zc::models::gpt(zc::models::gpt_small_config());
  m->eval();
  zc::Tensor tokens = zc::models::gpt_small_tokens();
  for (auto _ : state) benchmark::DoNotOptimize((*m)(tokens));
}
BENCHMARK(BM_GptSmall_Eager)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GptSmall_Compiled(benchmark::State& state) {
  zc::manual_seed(0);
  auto m = zc::models::gpt(zc::models::gpt_small_config());
  m->eval();
  auto fast = zc::compile(m, {.regions = zc::Regions::None});
  zc::Tensor tokens = zc::models::gpt_small_tokens();
  fast(tokens);
  for (auto _ : state) benchmark::DoNotOptimize(fast(tokens));
}
BENCHMARK(BM_GptSmall_Compiled)->Unit(benchmark::kMillisecond)->UseRealTime();

// Capture to first result of one seed64 Layer, nothing cached; counters give each stage.
void BM_ColdCompile_SeedLayer(benchmark::State& state) {
  auto layer = std::make_shared<zc::models::SeedLayer>(10);
  zc::Tensor x = zc::randn({10, 10});
  double capture = 0, lower = 0, codegen = 0, cxx = 0, load = 0, total = 0;
  for (auto _ : state) {
    zc::compiler::reset();
    zc::compiler::reset_stats();
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(zc::compile(layer)(x));
    total +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    zc::compiler::Stats s = zc::compiler::stats();
    capture += s.capture_ms;
    lower += s.lower_ms;
    codegen += s.codegen_ms;
    cxx += s.cxx_ms;
    load += s.load_ms;
  }
  double n = static_cast<double>(state.iterations());
  state.counters["total_ms"] = total / n;
  state.counters["capture_ms"] = capture / n;
  state.counters["lower_ms"] = lower / n;
  state.counters["codegen_ms"] = codegen / n;
  state.counters["cxx_ms"] = cxx / n;
  state.counters["load_ms"] = load / n;
}
BENCHMARK(BM_ColdCompile_SeedLayer)->Unit(benchmark::kMillisecond)->Iterations(5);

// x[n,n] @ W^T[n,n] + b, generated inline (arg 1 = 0) or through BLAS (arg 1 = 1).
void BM_MatmulInlineVsBlas(benchmark::State& state) {
  int64_t n = state.range(0);
  bool blas = state.range(1) != 0;
  auto lin = std::make_shared<zc::nn::Linear>(n, n);
  zc::Tensor x = zc::randn({n, n});
  auto cap = zc::capture::capture_module(*lin, x, nullptr, true);
  auto backend =
      zc::codegen::cpp::make_cpp_backend({.inline_matmul_max_flops = blas ? 0 : INT64_MAX});
  zc::runtime::CompileContext no_cache(nullptr);
  auto exec = zc::runtime::build_executable(cap.graph, *backend, no_cache);
  std::vector<const zc::Tensor*> args;
  for (const auto& b : cap.bindings)
    args.push_back(b.kind == zc::ir::InputKind::user ? &x : &b.tensor);
  for (auto _ : state) benchmark::DoNotOptimize(exec->run(args));
  state.counters["flops"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatmulInlineVsBlas)
    ->ArgsProduct({{8, 16, 24, 32, 48, 64, 96, 128}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// Causal attention over [batch, heads, T, 64] as one kernel (arg 2 = 1) or decomposed into
// batched products around a softmax kernel (0): gpt-small's shape, then longer sequences.
void BM_Attention(benchmark::State& state) {
  const int64_t heads = state.range(0), t = state.range(1);
  const bool fused = state.range(2) != 0;
  const int64_t batch = t <= 128 ? 4 : 1;
  std::vector<zc::Tensor> in{zc::randn({batch, heads, t, 64}), zc::randn({batch, heads, t, 64}),
                             zc::randn({batch, heads, t, 64})};
  auto cap = zc::capture::capture_function(in, [&] {
    return std::vector<zc::Tensor>{zc::scaled_dot_product_attention(in[0], in[1], in[2], true)};
  });
  auto backend = zc::codegen::cpp::make_cpp_backend({.attention_kernel = fused});
  zc::runtime::CompileContext no_cache(nullptr);
  auto exec = zc::runtime::build_executable(cap.graph, *backend, no_cache);
  std::vector<const zc::Tensor*> args;
  for (const auto& t : in) args.push_back(&t);
  for (auto _ : state) benchmark::DoNotOptimize(exec->run(args));
  // Causal: half the scores' and values' products (2 x T^2 x 64 multiply-adds per head).
  state.counters["flops"] = benchmark::Counter(2.0 * batch * heads * t * t * 64,
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Attention)
    ->ArgsProduct({{4}, {128}, {0, 1}})
    ->ArgsProduct({{12}, {1024, 4096}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
