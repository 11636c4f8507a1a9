// Which single-precision GEMM to call on this CPU: OpenBLAS (as loaded, so with whatever core
// type it detected) against oneDNN's dnnl_sgemm (JIT kernels chosen by the CPU's ISA), on the
// products zc's models make, at every power-of-two thread count up to the machine's cores.
// Both libraries run on libgomp's threads, as zc's generated loops do.
//
//   bench/cpu_gemm --benchmark_format=json
//
// Each case is BM_<lib>/M/N/K/transB/threads; the counter GFLOP/s is the product's rate.
// BM_dnnl_packed is oneDNN's matmul primitive with the weight reordered once, outside the
// timing, into the layout the primitive asks for (format "any"): what packing a constant
// weight at load time would gain over dnnl_sgemm, which packs B on every call.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace {

struct Operands {
  std::vector<float> a, b, c;
  Operands(int64_t m, int64_t n, int64_t k)
      : a(static_cast<size_t>(m * k)),
        b(static_cast<size_t>(k * n)),
        c(static_cast<size_t>(m * n)) {
    std::mt19937 gen(0);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (float& x : a) x = u(gen);
    for (float& x : b) x = u(gen);
  }
};

// Arguments: M, N, K, B transposed (a Linear's weight is [N, K]), threads.
template <bool kDnnl>
void BM_sgemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool tb = state.range(3) != 0;
  const int threads = static_cast<int>(state.range(4));
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  Operands o(m, n, k);
  const int64_t ldb = tb ? k : n;
  for (auto _ : state) {
    if constexpr (kDnnl) {
      dnnl_sgemm('N', tb ? 'T' : 'N', m, n, k, 1.f, o.a.data(), k, o.b.data(), ldb, 0.f, o.c.data(),
                 n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), 1.f, o.a.data(), static_cast<int>(k),
                  o.b.data(), static_cast<int>(ldb), 0.f, o.c.data(), static_cast<int>(n));
    }
    benchmark::DoNotOptimize(o.c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The same product through a matmul primitive whose weight was packed beforehand.
void BM_dnnl_packed(benchmark::State& state) {
  using dnnl::memory;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool tb = state.range(3) != 0;
  omp_set_num_threads(static_cast<int>(state.range(4)));
  Operands o(m, n, k);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::desc a_md({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc b_user({k, n}, memory::data_type::f32,
                            tb ? memory::format_tag::ba : memory::format_tag::ab);
  const memory::desc b_any({k, n}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), eng);
  const dnnl::matmul mm(pd);
  memory a(a_md, eng, o.a.data()), b(b_user, eng, o.b.data()), c(c_md, eng, o.c.data());
  memory packed(pd.weights_desc(), eng);
  dnnl::reorder(b, packed).execute(s, b, packed);
  s.wait();
  for (auto _ : state) {
    mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, packed}, {DNNL_ARG_DST, c}});
    s.wait();
    benchmark::DoNotOptimize(o.c.data());
  }
  state.SetLabel(pd.impl_info_str());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// gpt-small (4 x 128 tokens, d 256, ff 1024): QKV, out projection, MLP up and down, then one
// head's attention (scores, then the values); the 12-layer GPT (8 x 128 tokens, d 768).
void shapes(benchmark::internal::Benchmark* b) {
  const int64_t shapes[][4] = {
      {512, 768, 256, 1},   {512, 256, 256, 1},   {512, 1024, 256, 1},  {512, 256, 1024, 1},
      {128, 128, 64, 1},    {128, 64, 128, 0},    {1024, 2304, 768, 1}, {1024, 768, 768, 1},
      {1024, 3072, 768, 1}, {1024, 768, 3072, 1},
  };
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (const auto& s : shapes) {
    for (int t = 1; t <= cores; t *= 2) b->Args({s[0], s[1], s[2], s[3], t});
    if ((cores & (cores - 1)) != 0) b->Args({s[0], s[1], s[2], s[3], cores});
  }
  b->ArgNames({"M", "N", "K", "tB", "threads"});
}

BENCHMARK_TEMPLATE(BM_sgemm, false)
    ->Name("BM_openblas")
    ->Apply(shapes)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_sgemm, true)
    ->Name("BM_dnnl")
    ->Apply(shapes)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_dnnl_packed)->Apply(shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
