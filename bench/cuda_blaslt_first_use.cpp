// What cuBLASLt costs the first product of a process, step by step, and whether an algorithm
// stored by an earlier process (cuBLASLt's opaque cublasLtMatmulAlgo_t, which may be kept and
// reused with the same library version) takes that cost away. One process measures one start:
//
//   build/bench/cuda_blaslt_first_use --save FILE   heuristic per product, algorithms saved
//   build/bench/cuda_blaslt_first_use --load FILE   algorithms from FILE, no heuristic
//
// Products: gpt12's four f32 linears (x [1024, 768] times W^T, with the bias epilogue). Prints
// one JSON object: the library's load (dlopen and symbols) and cublasLtCreate, then per product
// the heuristic (0 with --load), the first cublasLtMatmul (queued and synchronized) and the
// second. The GPU context is made before any clock starts, as in zc bench.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cuda/allocator.h"
#include "cuda/blaslt_descriptors.h"
#include "cuda/blaslt_library.h"
#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "zc/cuda.h"
#include "zc/error.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int run(const std::string& mode, const std::string& file) {
  using namespace zc::cuda;
  if (!zc::cuda::is_available()) {
    std::printf("{\"skipped\": \"no GPU\"}\n");
    return 0;
  }
  use_device(0);
  const CUstream stream = current_stream(0);
  const auto found = find_blaslt();
  if (!found) throw zc::Error("cuda_blaslt_first_use: no cuBLASLt library found");

  auto t = Clock::now();
  const BlasLt lt = load_blaslt(found->path);
  const double load_ms = ms_since(t);
  cublasLtHandle_t handle = nullptr;
  t = Clock::now();
  check_blaslt(lt.cublasLtCreate(&handle), "cublasLtCreate");
  const double create_ms = ms_since(t);

  const int64_t M = 1024, K_max = 3072, N_max = 3072;
  const CUdeviceptr x = allocate(M * K_max * 4, 0), w = allocate(N_max * K_max * 4, 0);
  const CUdeviceptr y = allocate(M * N_max * 4, 0), bias = allocate(N_max * 4, 0);
  const CUdeviceptr workspace = allocate(kBlasLtWorkspaceBytes, 0);
  struct Shape {
    int64_t N, K;
  };
  const std::vector<Shape> shapes = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};
  std::vector<cublasLtMatmulAlgo_t> algos(shapes.size());
  if (mode == "--load") {
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(algos.data()), algos.size() * sizeof(cublasLtMatmulAlgo_t));
    if (!in) throw zc::Error("cuda_blaslt_first_use: cannot read algorithms from " + file);
  }
  std::string rows;
  for (size_t i = 0; i < shapes.size(); ++i) {
    GemmProblem p;
    p.M = M;
    p.N = shapes[i].N;
    p.K = shapes[i].K;
    p.trans_b = true;  // y = x W^T, W stored [N, K]
    p.lda = p.K;
    p.ldb = p.K;
    p.ldd = p.N;
    p.epilogue = Epilogue::bias;
    const GemmDescriptors d(lt, p, gemm_alignment(p, x, w, y, bias), bias);
    double heuristic_ms = 0;
    if (mode == "--save") {
      cublasLtMatmulHeuristicResult_t result{};
      int count = 0;
      t = Clock::now();
      check_blaslt(lt.cublasLtMatmulAlgoGetHeuristic(handle, d.op.get(), d.lt_a.get(), d.lt_b.get(),
                                                     d.lt_d.get(), d.lt_d.get(), d.preference.get(),
                                                     1, &result, &count),
                   "cublasLtMatmulAlgoGetHeuristic");
      heuristic_ms = ms_since(t);
      if (count < 1) throw zc::Error("cuda_blaslt_first_use: no algorithm for " + describe(p));
      algos[i] = result.algo;
    }
    const float one = 1.0f, zero = 0.0f;
    auto product = [&] {
      auto start = Clock::now();
      // Row-major as zc multiplies: cuBLASLt's A is W, its B is x.
      check_blaslt(lt.cublasLtMatmul(
                       handle, d.op.get(), &one, reinterpret_cast<void*>(w), d.lt_a.get(),
                       reinterpret_cast<void*>(x), d.lt_b.get(), &zero, reinterpret_cast<void*>(y),
                       d.lt_d.get(), reinterpret_cast<void*>(y), d.lt_d.get(), &algos[i],
                       reinterpret_cast<void*>(workspace), kBlasLtWorkspaceBytes, stream),
                   "cublasLtMatmul");
      check(driver().cuStreamSynchronize(stream), "synchronizing");
      return ms_since(start);
    };
    const double first_ms = product(), second_ms = product();
    char row[256];
    std::snprintf(row, sizeof row,
                  "%s{\"N\": %lld, \"K\": %lld, \"heuristic_ms\": %.3f, \"first_matmul_ms\": %.3f, "
                  "\"second_matmul_ms\": %.3f}",
                  i ? ", " : "", static_cast<long long>(p.N), static_cast<long long>(p.K),
                  heuristic_ms, first_ms, second_ms);
    rows += row;
  }
  if (mode == "--save") {
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(algos.data()),
               algos.size() * sizeof(cublasLtMatmulAlgo_t));
  }
  std::printf(
      "{\"mode\": \"%s\", \"cublaslt\": %zu, \"load_ms\": %.3f, \"create_ms\": %.3f, "
      "\"products\": [%s]}\n",
      mode.c_str() + 2, lt.version, load_ms, create_ms, rows.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "", file = argc > 2 ? argv[2] : "";
  if ((mode != "--save" && mode != "--load") || file.empty()) {
    std::fprintf(stderr, "usage: %s --save FILE | --load FILE\n", argv[0]);
    return 2;
  }
  try {
    return run(mode, file);
  } catch (const zc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
