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
// weight at load time would gain over dnnl_sgemm, which packs B on every call. BM_dnnl_bf16 is
// the same in bf16: the weight converted and packed once, A converted to bf16 on every call (a
// reorder, timed), products accumulated in f32 into an f32 C (AVX-512 BF16 or AMX where the
// CPU has them); its label says which implementation ran and its counter max_rel_err how far
// its result is from f32's, relative to the largest |C|. (oneDNN 2.6's bf16 math mode on the
// f32 primitive, tried first, kept f32 kernels: docs/codegen.md.)
// BM_epilogue_<whole|rows> times a product followed by a tanh-GELU over its result (gpt's
// MLP up): the whole product on the team and then the epilogue over C in memory (what
// generated code does), against each thread taking a block of 32 rows, its product on one
// thread and the epilogue while the block is in its cache (an epilogue "in the tiles").
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
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

// The same product through a matmul primitive whose weight was packed beforehand, in f32 or
// with bf16 operands.
void packed_product(benchmark::State& state, bool bf16) {
  using dnnl::memory;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool tb = state.range(3) != 0;
  omp_set_num_threads(static_cast<int>(state.range(4)));
  Operands o(m, n, k);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const auto op_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc a_user({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc a_md({m, k}, op_type, memory::format_tag::ab);
  const memory::desc b_user({k, n}, memory::data_type::f32,
                            tb ? memory::format_tag::ba : memory::format_tag::ab);
  const memory::desc b_any({k, n}, op_type, memory::format_tag::any);
  const memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_any, c_md), eng);
  } catch (const dnnl::error& e) {  // no bf16 matmul without AVX-512 (this project's machine)
    state.SkipWithError(
        ("oneDNN has no such matmul on this CPU: " + std::string(e.what())).c_str());
    return;
  }
  const dnnl::matmul mm(pd);
  memory a(a_user, eng, o.a.data()), b(b_user, eng, o.b.data()), c(c_md, eng, o.c.data());
  memory a_op = bf16 ? memory(a_md, eng) : a;
  const dnnl::reorder convert_a = bf16 ? dnnl::reorder(a, a_op) : dnnl::reorder();
  memory packed(pd.weights_desc(), eng);
  dnnl::reorder(b, packed).execute(s, b, packed);
  s.wait();
  for (auto _ : state) {
    if (bf16) convert_a.execute(s, a, a_op);
    mm.execute(s, {{DNNL_ARG_SRC, a_op}, {DNNL_ARG_WEIGHTS, packed}, {DNNL_ARG_DST, c}});
    s.wait();
    benchmark::DoNotOptimize(o.c.data());
  }
  state.SetLabel(pd.impl_info_str());
  if (bf16) {  // against f32 math on the same operands
    std::vector<float> exact(o.c.size());
    dnnl_sgemm('N', tb ? 'T' : 'N', m, n, k, 1.f, o.a.data(), k, o.b.data(), tb ? k : n, 0.f,
               exact.data(), n);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(o.c[i] - exact[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(exact[i])));
    }
    state.counters["max_rel_err"] = worst / scale;
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_dnnl_packed(benchmark::State& state) {
  packed_product(state, false);
}
void BM_dnnl_bf16(benchmark::State& state) {
  packed_product(state, true);
}

// A GELU-shaped epilogue that vectorizes without branches (this file is built for the machine,
// as generated code is): u / sqrt(1 + u^2) in place of tanh(u), a square root and a division
// per element like the prelude's zc_tanhf. Its values do not matter here, only its cost.
inline float gelu(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + u / std::sqrt(1.f + u * u));
}

// C = A B^T then GELU over C: arguments M, N, K, threads, and whether each thread takes rows.
void epilogue_product(benchmark::State& state, bool rows) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  omp_set_num_threads(threads);
  Operands o(m, n, k);
  constexpr int64_t kRows = 32;
  for (auto _ : state) {
    if (rows) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < m; r += kRows) {
        const int64_t h = std::min(kRows, m - r);
        dnnl_sgemm('N', 'T', h, n, k, 1.f, o.a.data() + r * k, k, o.b.data(), k, 0.f,
                   o.c.data() + r * n, n);
        float* c = o.c.data();
#pragma omp simd
        for (int64_t e = r * n; e < (r + h) * n; ++e) c[e] = gelu(c[e]);
      }
    } else {
      dnnl_sgemm('N', 'T', m, n, k, 1.f, o.a.data(), k, o.b.data(), k, 0.f, o.c.data(), n);
      float* c = o.c.data();
#pragma omp parallel for simd schedule(static)
      for (int64_t e = 0; e < m * n; ++e) c[e] = gelu(c[e]);
    }
    benchmark::DoNotOptimize(o.c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
void BM_epilogue_whole(benchmark::State& state) {
  epilogue_product(state, false);
}
void BM_epilogue_rows(benchmark::State& state) {
  epilogue_product(state, true);
}

// The MLP up products of gpt-small and of the 12-layer GPT, at 1..cores threads.
void epilogue_shapes(benchmark::internal::Benchmark* b) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (const auto& s : {std::array<int64_t, 3>{512, 1024, 256}, {1024, 3072, 768}}) {
    for (int t = 1; t <= cores; t *= 2) b->Args({s[0], s[1], s[2], t});
    if ((cores & (cores - 1)) != 0) b->Args({s[0], s[1], s[2], cores});
  }
  b->ArgNames({"M", "N", "K", "threads"});
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
BENCHMARK(BM_dnnl_bf16)->Apply(shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_epilogue_whole)->Apply(epilogue_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_epilogue_rows)->Apply(epilogue_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
