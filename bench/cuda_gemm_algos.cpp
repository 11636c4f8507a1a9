// How fast cuBLASLt's first heuristic choice is against the other algorithms it offers, on the
// f32 products of a gpt12 training step (zc's row-major form: D[M,N] = A[M,K] B[K,N], A or B
// stored transposed where marked). For each product: up to 16 heuristic candidates, each timed
// with CUDA events (3 calls to settle, then the median of 20), and the index of the fastest.
// One JSON object per product on stdout. bench/torch_gemm.py times the same products in torch.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/allocator.h"
#include "cuda/blaslt.h"
#include "cuda/blaslt_descriptors.h"
#include "cuda/blaslt_library.h"
#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "zc/cuda.h"
#include "zc/error.h"

namespace {

using namespace zc::cuda;

struct Case {
  int64_t M, N, K;
  bool trans_a, trans_b;
};

// gpt12's products: forward x W^T, input gradients dY W, weight gradients dY^T X.
const std::vector<Case> kCases = {
    {1024, 2304, 768, false, true},  {1024, 768, 768, false, true},
    {1024, 3072, 768, false, true},  {1024, 768, 3072, false, true},
    {1024, 768, 2304, false, false}, {1024, 768, 768, false, false},
    {1024, 3072, 768, false, false}, {1024, 768, 3072, false, false},
    {2304, 768, 1024, true, false},  {768, 768, 1024, true, false},
    {3072, 768, 1024, true, false},  {768, 3072, 1024, true, false},
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run() {
  if (!zc::cuda::is_available()) {
    std::printf("{\"skipped\": \"no GPU\"}\n");
    return 0;
  }
  use_device(0);
  const CUstream stream = current_stream(0);
  const BlasLt& lt = blaslt();
  cublasLtHandle_t handle = nullptr;
  check_blaslt(lt.cublasLtCreate(&handle), "cublasLtCreate");
  const size_t most = size_t{3072} * 3072 * 4;
  const CUdeviceptr a = allocate(most, 0), b = allocate(most, 0), d = allocate(most, 0);
  const CUdeviceptr workspace = allocate(kBlasLtWorkspaceBytes, 0);
  CUevent start = nullptr, end = nullptr;
  check(driver().cuEventCreate(&start, CU_EVENT_DEFAULT), "event");
  check(driver().cuEventCreate(&end, CU_EVENT_DEFAULT), "event");
  for (const Case& c : kCases) {
    GemmProblem p;
    p.M = c.M, p.N = c.N, p.K = c.K, p.trans_a = c.trans_a, p.trans_b = c.trans_b;
    p.lda = c.trans_a ? c.M : c.K;
    p.ldb = c.trans_b ? c.K : c.N;
    p.ldd = c.N;
    const GemmDescriptors desc(lt, p, gemm_alignment(p, a, b, d, 0), 0);
    cublasLtMatmulHeuristicResult_t results[16];
    int count = 0;
    check_blaslt(lt.cublasLtMatmulAlgoGetHeuristic(
                     handle, desc.op.get(), desc.lt_a.get(), desc.lt_b.get(), desc.lt_d.get(),
                     desc.lt_d.get(), desc.preference.get(), 16, results, &count),
                 "cublasLtMatmulAlgoGetHeuristic");
    const float one = 1.0f, zero = 0.0f;
    std::string times;
    int best = -1;
    float best_us = 1e30f, first_us = 0;
    for (int i = 0; i < count; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      auto product = [&] {
        // cuBLASLt's A is zc's B (D^T = B^T A^T), as gemm() calls it.
        return lt.cublasLtMatmul(handle, desc.op.get(), &one, reinterpret_cast<void*>(b),
                                 desc.lt_a.get(), reinterpret_cast<void*>(a), desc.lt_b.get(),
                                 &zero, reinterpret_cast<void*>(d), desc.lt_d.get(),
                                 reinterpret_cast<void*>(d), desc.lt_d.get(), &results[i].algo,
                                 reinterpret_cast<void*>(workspace), kBlasLtWorkspaceBytes, stream);
      };
      bool ok = true;
      for (int w = 0; w < 3 && ok; ++w) ok = product() == CUBLAS_STATUS_SUCCESS;
      std::vector<float> us;
      for (int r = 0; r < 20 && ok; ++r) {
        check(driver().cuEventRecord(start, stream), "event");
        ok = product() == CUBLAS_STATUS_SUCCESS;
        check(driver().cuEventRecord(end, stream), "event");
        check(driver().cuEventSynchronize(end), "event");
        float ms = 0;
        check(driver().cuEventElapsedTime(&ms, start, end), "event");
        us.push_back(ms * 1e3f);
      }
      if (!ok) continue;
      const float m = median(us);
      if (i == 0) first_us = m;
      if (m < best_us) best_us = m, best = i;
      char item[64];
      std::snprintf(item, sizeof item, "%s%.1f", times.empty() ? "" : ", ", m);
      times += item;
    }
    const double gflop = 2e-9 * c.M * c.N * c.K;
    std::printf(
        "{\"problem\": \"%s\", \"candidates\": %d, \"first_us\": %.1f, \"best_us\": %.1f, "
        "\"best\": %d, \"first_tflops\": %.1f, \"best_tflops\": %.1f, \"us\": [%s]}\n",
        describe(p).c_str(), count, first_us, best_us, best, gflop / first_us * 1e3,
        gflop / best_us * 1e3, times.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const zc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
