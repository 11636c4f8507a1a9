// The floor of cold compile time: the system compiler turning generated source into a shared
// object, and loading it. Each compile case runs under several flag sets so the choice made in
// make_target stays backed by numbers: the label names the variant, "default" is make_target's.
//
// Figures (gcc 13.3, 16-core Xeon, idle, median of 7, compile + dlopen):
//   tiny source:       52 ms (with libstdc++'s C++ <math.h>: 143 ms)
//   200-line source:  276 ms; plain -O2 223 ms, -O3 298 ms, -O1 160 ms
//   200-line run:     4.2 ms; plain -O2 12.4 ms, -O3 3.9 ms, -O1 10.4 ms
//   from_bytes load of its 21 KB object: 88 us; uncached compiler discovery: 1.4 ms
// Compiler discovery on a 2-core VM (gcc 12.2, load ~3, median of 7 repetitions):
//   `c++ --version` probe (BM_FindCxxProbe) 1.6 ms; warm memo (BM_FindCxxMemo) 45 us
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <vector>

#include "toolchain/compiler.h"
#include "toolchain/shared_library.h"
#include "toolchain/target.h"

namespace {

using namespace zc::toolchain;

constexpr const char* kTiny = R"(#include <math.h>
#include <stdint.h>
extern "C" int zc_add(int a, int b) { return a + b; }
)";

// About 200 lines shaped like a small graph's generated code: fused pointwise loops, a
// layer_norm and a softmax (reduction + pointwise in one kernel), a small GEMM with a bias and
// GELU epilogue, and an entry point that runs them over one arena.
constexpr const char* kKernels = R"(#include <math.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>

static inline float zc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float zc_gelu(float x) {
  const float k = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// kernel 0: relu(x * w + b) -> sigmoid
static void zc_kernel_0(const float* __restrict x, const float* __restrict w,
                        const float* __restrict b, float* __restrict out, int64_t n, int64_t d) {
#pragma omp parallel for if (n * d > 65536)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      float v = x[i * d + j] * w[j] + b[j];
      v = v > 0.0f ? v : 0.0f;
      out[i * d + j] = zc_sigmoid(v);
    }
  }
}

// kernel 1: layer_norm over the last dimension, one pass for the statistics
static void zc_kernel_1(const float* __restrict x, const float* __restrict gamma,
                        const float* __restrict beta, float* __restrict out, int64_t n,
                        int64_t d, float eps) {
#pragma omp parallel for if (n * d > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    float mean = 0.0f;
    for (int64_t j = 0; j < d; ++j) mean += row[j];
    mean /= (float)d;
    float var = 0.0f;
    for (int64_t j = 0; j < d; ++j) {
      float c = row[j] - mean;
      var += c * c;
    }
    var /= (float)d;
    float inv = 1.0f / sqrtf(var + eps);
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = (row[j] - mean) * inv * gamma[j] + beta[j];
  }
}

// kernel 2: softmax over the last dimension
static void zc_kernel_2(const float* __restrict x, float* __restrict out, int64_t n, int64_t d) {
#pragma omp parallel for if (n * d > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    float m = -INFINITY;
    for (int64_t j = 0; j < d; ++j) m = fmaxf(m, row[j]);
    float s = 0.0f;
    for (int64_t j = 0; j < d; ++j) {
      float e = expf(row[j] - m);
      out[i * d + j] = e;
      s += e;
    }
    float inv = 1.0f / s;
    for (int64_t j = 0; j < d; ++j) out[i * d + j] *= inv;
  }
}

// kernel 3: out = gelu(a @ b + bias), a: [m,k], b: [k,n]
static void zc_kernel_3(const float* __restrict a, const float* __restrict b,
                        const float* __restrict bias, float* __restrict out, int64_t m,
                        int64_t k, int64_t n) {
#pragma omp parallel for if (m * n * k > 262144)
  for (int64_t i = 0; i < m; ++i) {
    float* o = out + i * n;
    for (int64_t j = 0; j < n; ++j) o[j] = bias[j];
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) o[j] += av * brow[j];
    }
    for (int64_t j = 0; j < n; ++j) o[j] = zc_gelu(o[j]);
  }
}

// kernel 4: residual add + tanh + scale, broadcasting a row vector
static void zc_kernel_4(const float* __restrict x, const float* __restrict r,
                        const float* __restrict s, float* __restrict out, int64_t n, int64_t d) {
#pragma omp parallel for if (n * d > 65536)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      float v = x[i * d + j] + r[i * d + j];
      out[i * d + j] = tanhf(v) * s[j];
    }
  }
}

// kernel 5: column sums (a reduction over the outer dimension)
static void zc_kernel_5(const float* __restrict x, float* __restrict out, int64_t n, int64_t d) {
  for (int64_t j = 0; j < d; ++j) out[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) out[j] += x[i * d + j];
  }
}

// kernel 6: transpose [n,d] -> [d,n], in tiles
static void zc_kernel_6(const float* __restrict x, float* __restrict out, int64_t n, int64_t d) {
  const int64_t T = 16;
  for (int64_t i0 = 0; i0 < n; i0 += T) {
    for (int64_t j0 = 0; j0 < d; j0 += T) {
      int64_t i1 = i0 + T < n ? i0 + T : n;
      int64_t j1 = j0 + T < d ? j0 + T : d;
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) out[j * n + i] = x[i * d + j];
      }
    }
  }
}

// kernel 7: mean squared difference, a full reduction to one value
static void zc_kernel_7(const float* __restrict a, const float* __restrict b,
                        float* __restrict out, int64_t numel) {
  double acc = 0.0;
#pragma omp parallel for reduction(+ : acc) if (numel > 65536)
  for (int64_t i = 0; i < numel; ++i) {
    float dlt = a[i] - b[i];
    acc += (double)(dlt * dlt);
  }
  out[0] = (float)(acc / (double)numel);
}

// kernel 8: log-sum-exp of each row, then x - lse (log_softmax)
static void zc_kernel_8(const float* __restrict x, float* __restrict out, int64_t n,
                        int64_t d) {
#pragma omp parallel for if (n * d > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    float m = -INFINITY;
    for (int64_t j = 0; j < d; ++j) m = fmaxf(m, row[j]);
    float s = 0.0f;
    for (int64_t j = 0; j < d; ++j) s += expf(row[j] - m);
    float lse = m + logf(s);
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = row[j] - lse;
  }
}

// kernel 9: rms_norm over the last dimension
static void zc_kernel_9(const float* __restrict x, const float* __restrict w,
                        float* __restrict out, int64_t n, int64_t d) {
#pragma omp parallel for if (n * d > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float ss = 0.0f;
    for (int64_t j = 0; j < d; ++j) ss += x[i * d + j] * x[i * d + j];
    float inv = 1.0f / sqrtf(ss / (float)d + 1e-6f);
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = x[i * d + j] * inv * w[j];
  }
}

// kernel 10: round to bfloat16 and back (a cast pair the scheduler fused)
static inline uint16_t zc_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static void zc_kernel_10(const float* __restrict x, float* __restrict out, int64_t numel) {
  for (int64_t i = 0; i < numel; ++i) {
    uint32_t u = (uint32_t)zc_f2bf(x[i]) << 16;
    memcpy(&out[i], &u, 4);
  }
}

// The shapes are literals, as in generated code: a graph is compiled for the shapes its guards
// admit, so loop bounds are known to the compiler.
enum { ZC_N = 256, ZC_D = 256, ZC_H = 256 };

extern "C" int zc_graph_run(const float* const* inputs, float* const* outputs, float* arena) {
  const int64_t n = ZC_N, d = ZC_D, h = ZC_H;
  float* t0 = arena;
  float* t1 = t0 + n * d;
  float* t2 = t1 + n * d;
  float* t3 = t2 + n * h;
  float* t4 = t3 + n * h;
  memset(t0, 0, sizeof(float) * n * d);
  zc_kernel_0(inputs[0], inputs[1], inputs[2], t0, n, d);
  zc_kernel_1(t0, inputs[3], inputs[4], t1, n, d, 1e-5f);
  zc_kernel_3(t1, inputs[5], inputs[6], t2, n, d, h);
  zc_kernel_2(t2, t3, n, h);
  zc_kernel_8(t2, t4, n, h);
  zc_kernel_4(t3, t4, inputs[7], outputs[0], n, h);
  zc_kernel_5(outputs[0], outputs[1], n, h);
  zc_kernel_6(outputs[0], outputs[2], n, h);
  zc_kernel_7(t3, t4, outputs[3], n * h);
  zc_kernel_9(outputs[0], inputs[7], t3, n, h);
  zc_kernel_10(t3, outputs[0], n * h);
  return 0;
}

extern "C" int64_t zc_arena_floats(void) { return 2 * ZC_N * ZC_D + 3 * ZC_N * ZC_H; }

extern "C" const char* zc_kernel_names(void) {
  return "relu_sigmoid,layer_norm,softmax,gemm_bias_gelu,residual_tanh_scale,colsum,"
         "transpose,mse,log_softmax";
}
)";

struct Variant {
  const char* label;
  std::vector<std::string> (*edit)(std::vector<std::string>);
};

std::vector<std::string> replace(std::vector<std::string> flags, const std::string& from,
                                 const std::string& to) {
  for (auto& f : flags) {
    if (f == from) f = to;
  }
  return flags;
}

// make_target's gcc flags with the vectorizer options taken out: what the -O level alone does.
std::vector<std::string> plain(std::vector<std::string> flags) {
  std::erase_if(flags, [](const std::string& f) {
    return f == "-ftree-vectorize" || f.starts_with("-fvect-cost-model");
  });
  return flags;
}

const Variant kVariants[] = {
    {"default", [](std::vector<std::string> f) { return f; }},
    {"-O3", [](std::vector<std::string> f) { return replace(plain(std::move(f)), "-O2", "-O3"); }},
    {"plain -O2", [](std::vector<std::string> f) { return plain(std::move(f)); }},
    {"-O1", [](std::vector<std::string> f) { return replace(plain(std::move(f)), "-O2", "-O1"); }},
    {"C++ math.h",
     [](std::vector<std::string> f) {
       return replace(std::move(f), "-D_GLIBCXX_INCLUDE_NEXT_C_HEADERS", "-w");
     }},
};

const CompilerInfo& compiler() {
  static const CompilerInfo info = *find_cxx();
  return info;
}

// CPU time of the compiler processes: steadier than wall time on a loaded machine, since it
// leaves out the time spent waiting for a core.
double children_cpu_seconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

Target variant_target(int64_t index) {
  Target t = make_target("native");
  t.flags = kVariants[index].edit(t.flags);
  return t;
}

void compile_and_load(benchmark::State& state, const char* source, const char* symbol) {
  if (!compiler_available()) {
    state.SkipWithError("no C++ compiler");
    return;
  }
  Target target = variant_target(state.range(0));
  std::string dir = default_work_dir() + "/bench";
  double child_cpu = children_cpu_seconds();
  for (auto _ : state) {
    CompileResult r = compile_shared_object(compiler(), target, source, dir);
    auto lib = SharedLibrary::open(r.so_path);
    benchmark::DoNotOptimize(lib->symbol(symbol));
    std::filesystem::remove(r.so_path);
  }
  state.counters["compiler_cpu_ms"] = benchmark::Counter(
      (children_cpu_seconds() - child_cpu) * 1e3 / static_cast<double>(state.iterations()));
  state.SetLabel(kVariants[state.range(0)].label);
}

void BM_CompileLoadTiny(benchmark::State& state) {
  compile_and_load(state, kTiny, "zc_add");
}
BENCHMARK(BM_CompileLoadTiny)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CompileLoad200Lines(benchmark::State& state) {
  compile_and_load(state, kKernels, "zc_graph_run");
}
BENCHMARK(BM_CompileLoad200Lines)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();

// What the -O level buys at run time: the 200-line graph on a 256x256 input, one thread.
void BM_Run200Lines(benchmark::State& state) {
  Target target = variant_target(state.range(0));
  CompileResult r =
      compile_shared_object(compiler(), target, kKernels, default_work_dir() + "/bench");
  auto lib = SharedLibrary::open(r.so_path);
  std::filesystem::remove(r.so_path);
  using Run = int(const float* const*, float* const*, float*);
  auto* run = lib->function<Run>("zc_graph_run");
  std::vector<float> arena(lib->function<int64_t()>("zc_arena_floats")());
  std::vector<std::vector<float>> in(8, std::vector<float>(256 * 256, 0.01f));
  std::vector<std::vector<float>> out(4, std::vector<float>(256 * 256));
  const float* ins[8];
  float* outs[4];
  for (int i = 0; i < 8; ++i) ins[i] = in[i].data();
  for (int i = 0; i < 4; ++i) outs[i] = out[i].data();
  for (auto _ : state) {
    run(ins, outs, arena.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(kVariants[state.range(0)].label);
}
BENCHMARK(BM_Run200Lines)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);

void BM_LoadFromBytes(benchmark::State& state) {
  CompileResult r = compile_shared_object(compiler(), make_target("native"), kKernels,
                                          default_work_dir() + "/bench");
  std::vector<uint8_t> bytes = read_file_bytes(r.so_path);
  std::filesystem::remove(r.so_path);
  for (auto _ : state) {
    auto lib = SharedLibrary::from_bytes(bytes);
    benchmark::DoNotOptimize(lib->symbol("zc_graph_run"));
  }
  state.counters["bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_LoadFromBytes)->Unit(benchmark::kMicrosecond);

// Discovery without the process-wide cache, as each process start does it: with no memo
// (stat and `c++ --version`), and with a warm `--version` memo (stats and one small read).
void BM_FindCxxProbe(benchmark::State& state) {
  CompilerSearch search = CompilerSearch::from_env();
  search.memo_dir.clear();
  for (auto _ : state) benchmark::DoNotOptimize(discover_cxx(search));
}
BENCHMARK(BM_FindCxxProbe)->Unit(benchmark::kMicrosecond);

void BM_FindCxxMemo(benchmark::State& state) {
  CompilerSearch search = CompilerSearch::from_env();
  search.memo_dir = default_work_dir() + "/bench-cxx-memo";
  if (!discover_cxx(search)) {  // warms the memo
    state.SkipWithError("no C++ compiler");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(discover_cxx(search));
}
BENCHMARK(BM_FindCxxMemo)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
