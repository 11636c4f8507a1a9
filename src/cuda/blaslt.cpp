#include "cuda/blaslt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/allocator.h"
#include "cuda/blaslt_descriptors.h"
#include "cuda/blaslt_library.h"
#include "cuda/device.h"
#include "cuda/driver.h"
#include "util/check.h"
#include "util/hash.h"
#include "util/log.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {

bool has_bias(Epilogue e) {
  return e == Epilogue::bias || e == Epilogue::bias_relu;
}

void* as_pointer(CUdeviceptr p) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

struct PlanKey {
  GemmProblem problem;  // alpha set to 1: it is given per call
  int device = 0;
  GemmAlignment align;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    const GemmProblem& p = k.problem;
    uint64_t h = mix64(static_cast<uint64_t>(k.device));
    for (int64_t v :
         {p.M, p.N, p.K, p.lda, p.ldb, p.ldd, p.batch, p.stride_a, p.stride_b, p.stride_d}) {
      h = hash_combine(h, static_cast<uint64_t>(v));
    }
    const uint64_t kinds =
        static_cast<uint64_t>(p.a) | static_cast<uint64_t>(p.b) << 8 |
        static_cast<uint64_t>(p.d) << 16 | static_cast<uint64_t>(p.epilogue) << 24 |
        static_cast<uint64_t>(p.trans_a) << 32 | static_cast<uint64_t>(p.trans_b) << 33 |
        static_cast<uint64_t>(p.allow_tf32) << 34;
    const uint64_t aligns =
        static_cast<uint64_t>(k.align.a) | static_cast<uint64_t>(k.align.b) << 16 |
        static_cast<uint64_t>(k.align.d) << 32 | static_cast<uint64_t>(k.align.bias) << 48;
    return static_cast<size_t>(hash_combine(hash_combine(h, kinds), aligns));
  }
};

struct Plan {
  Plan(const BlasLt& lt, const GemmProblem& p, const GemmAlignment& align, CUdeviceptr b)
      : desc(lt, p, align, b), bias(b) {}
  GemmDescriptors desc;
  cublasLtMatmulAlgo_t algo{};
  // The bias pointer is an attribute of the operation descriptor, which every thread running
  // this plan shares: it is set and used under this lock (cublasLtMatmul reads it while
  // queueing, not later).
  std::mutex mu;
  CUdeviceptr bias = 0;  // the one desc points at
  uint64_t serial = 0;   // plans made before this one in the process
  // Whether a product other than a warm-up ran with it (planned_products).
  std::atomic<bool> ran{false};
};

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  std::unordered_map<CUstream, CUdeviceptr> workspaces;
};

struct State {
  std::mutex mu;
  std::vector<DeviceState> devices = std::vector<DeviceState>(device_count());
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  std::atomic<uint64_t> products{0};
  std::atomic<uint64_t> heuristic_runs{0};
};

// Never destroyed, like the allocator: handles, workspaces and plans stay valid while the
// process exits.
State& state() {
  static State* const s = new State();
  return *s;
}

// Called with the state's lock held, as are the two below.
cublasLtHandle_t handle_for(const BlasLt& lt, DeviceState& ds, int device) {
  if (!ds.handle) {
    cublasLtHandle_t handle = nullptr;
    const auto start = std::chrono::steady_clock::now();
    check_blaslt(lt.cublasLtCreate(&handle), "cublasLtCreate on cuda:" + std::to_string(device));
    ZC_LOG(timing) << "cublasLtCreate on cuda:" << device << ": "
                   << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                start)
                          .count()
                   << " ms";
    ds.handle = handle;
  }
  return ds.handle;
}

CUdeviceptr workspace_for(DeviceState& ds, int device, CUstream stream) {
  auto it = ds.workspaces.find(stream);
  if (it != ds.workspaces.end()) return it->second;
  const CUdeviceptr w = allocate(kBlasLtWorkspaceBytes, device, stream);
  ds.workspaces.emplace(stream, w);
  return w;
}

[[noreturn]] void raise_no_algorithm(const BlasLt& lt, const PlanKey& key, cublasStatus_t st) {
  const DeviceProperties& props = device_properties(key.device);
  const GemmAlignment& al = key.align;
  const std::string device = "cuda:" + std::to_string(key.device) + " (" + props.name + ", sm_" +
                             std::to_string(props.major) + std::to_string(props.minor) + ")";
  const std::string aligned = std::to_string(al.a) + ", " + std::to_string(al.b) + ", " +
                              std::to_string(al.d) + " and " + std::to_string(al.bias);
  throw Error("cuBLASLt " + std::to_string(lt.version) +
              " has no algorithm for the matrix product " + describe(key.problem) + " on " +
              device + " with A, B, D and the bias aligned to " + aligned + " bytes (" +
              blaslt_status_text(st) +
              "); make the operands contiguous and 16-byte aligned, or compute in f32");
}

Plan& plan_for(const BlasLt& lt, State& s, cublasLtHandle_t handle, const PlanKey& key,
               CUdeviceptr bias) {
  auto it = s.plans.find(key);
  if (it != s.plans.end()) [[likely]]
    return *it->second;
  const auto start = std::chrono::steady_clock::now();
  auto plan = std::make_unique<Plan>(lt, key.problem, key.align, bias);
  const GemmDescriptors& d = plan->desc;
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  s.heuristic_runs.fetch_add(1, std::memory_order_relaxed);
  const cublasStatus_t st = lt.cublasLtMatmulAlgoGetHeuristic(
      handle, d.op.get(), d.lt_a.get(), d.lt_b.get(), d.lt_d.get(), d.lt_d.get(),
      d.preference.get(), 1, &result, &count);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) raise_no_algorithm(lt, key, st);
  check_blaslt(st, "cublasLtMatmulAlgoGetHeuristic for " + describe(key.problem));
  if (count < 1 || result.state != CUBLAS_STATUS_SUCCESS) raise_no_algorithm(lt, key, result.state);
  plan->algo = result.algo;
  plan->serial = s.plans.size();
  ZC_LOG(timing)
      << "cublaslt plan for " << describe(key.problem) << " on cuda:" << key.device << ": "
      << std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count()
      << " us, workspace " << result.workspaceSize << " bytes";
  return *s.plans.emplace(key, std::move(plan)).first->second;
}

// The product of an empty sum is zero: computed as a sum of one term over zeroed operands, so
// that the epilogue (bias, relu) applies as for any other product.
void gemm_empty_sum(const GemmProblem& p, CUdeviceptr d, CUdeviceptr bias, int device,
                    CUstream stream) {
  const size_t bytes = static_cast<size_t>(std::max(p.M, p.N)) * dtype_size(p.a);
  const CUdeviceptr zeros = allocate(bytes, device, stream);
  // Work queued on `stream` after this product may reuse the block, never work before it.
  struct Release {
    CUdeviceptr ptr;
    ~Release() { release(ptr); }
  } release_zeros{zeros};
  check(driver().cuMemsetD8Async(zeros, 0, bytes, stream), "clearing the operands of K=0");
  GemmProblem q = p;
  q.K = 1;
  q.trans_a = q.trans_b = false;
  q.lda = 1;
  q.ldb = p.N;
  q.stride_a = q.stride_b = 0;
  gemm(q, zeros, zeros, d, bias, device, stream);
}

// gemm() and warm_gemm(): a warm-up brings its own workspace (warm_workspace) and is not
// counted as a product nor marks its plan as run.
void queue_product(const GemmProblem& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr d,
                   CUdeviceptr bias, int device, CUstream stream, CUdeviceptr warm_workspace) {
  check_gemm_problem(p);
  check_device(device);
  if (p.M == 0 || p.N == 0 || p.batch == 0) return;
  ZC_CHECK(d != 0, "cuBLASLt product without D: " << describe(p));
  ZC_CHECK(!has_bias(p.epilogue) || bias != 0, "bias epilogue without a bias: " << describe(p));
  if (p.K == 0) {
    if (warm_workspace) return;  // no kernel of its own to load: gemm_empty_sum is a K=1 product
    return gemm_empty_sum(p, d, bias, device, stream);
  }
  ZC_CHECK(a != 0 && b != 0, "cuBLASLt product without operands: " << describe(p));

  const BlasLt& lt = blaslt();
  use_device(device);
  PlanKey key{p, device, gemm_alignment(p, a, b, d, bias)};
  key.problem.alpha = 1.0;
  State& s = state();
  cublasLtHandle_t handle = nullptr;
  CUdeviceptr workspace = 0;
  Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    DeviceState& ds = s.devices[device];
    handle = handle_for(lt, ds, device);
    workspace = warm_workspace ? warm_workspace : workspace_for(ds, device, stream);
    plan = &plan_for(lt, s, handle, key, bias);
  }
  if (!warm_workspace && !plan->ran.load(std::memory_order_relaxed)) {
    plan->ran.store(true, std::memory_order_relaxed);
  }

  // alpha and beta have the scale type: double for f64, float otherwise.
  const float alpha_f = static_cast<float>(p.alpha), beta_f = 0.0f;
  const double alpha_d = p.alpha, beta_d = 0.0;
  const bool f64 = p.a == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  const GemmDescriptors& desc = plan->desc;
  std::lock_guard<std::mutex> lock(plan->mu);
  if (has_bias(p.epilogue) && plan->bias != bias) {
    plan->desc.set_bias(bias);
    plan->bias = bias;
  }
  // The operands swap (D^T = B^T A^T): cuBLASLt's A is zc's B.
  const cublasStatus_t st = lt.cublasLtMatmul(
      handle, desc.op.get(), alpha, as_pointer(b), desc.lt_a.get(), as_pointer(a), desc.lt_b.get(),
      beta, as_pointer(d), desc.lt_d.get(), as_pointer(d), desc.lt_d.get(), &plan->algo,
      as_pointer(workspace), kBlasLtWorkspaceBytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    raise_blaslt_error(st,
                       "cublasLtMatmul for " + describe(p) + " on cuda:" + std::to_string(device));
  }
  if (!warm_workspace) s.products.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void prepare_blaslt(int device) {
  check_device(device);
  const BlasLt& lt = blaslt();
  use_device(device);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const cublasLtHandle_t handle = handle_for(lt, s.devices[device], device);
  // cuBLASLt starts itself (80-90 ms) in a process's first heuristic query, or in its first
  // product when the algorithm is given: one query of a small f32 product, whose result is not
  // kept, so it is not counted among the plans. Its first query of a bf16 product costs as much
  // again (108 ms on the H200 host, on a cold LLM's way to its first token), and f16's likely
  // so: a query of each here, on the start's thread, instead of in the first such product.
  const auto start = std::chrono::steady_clock::now();
  for (DType low : {DType::f32, DType::bf16, DType::f16}) {
    GemmProblem p;
    p.a = p.b = low;
    p.M = p.N = p.K = p.lda = p.ldb = p.ldd = 64;
    const GemmDescriptors d(lt, p, GemmAlignment{}, 0);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    check_blaslt(lt.cublasLtMatmulAlgoGetHeuristic(handle, d.op.get(), d.lt_a.get(), d.lt_b.get(),
                                                   d.lt_d.get(), d.lt_d.get(), d.preference.get(),
                                                   1, &result, &count),
                 "cuBLASLt's first heuristic query on cuda:" + std::to_string(device));
  }
  ZC_LOG(timing)
      << "cuBLASLt's one-time start on cuda:" << device << ": "
      << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
      << " ms";
}

void gemm(const GemmProblem& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr d, CUdeviceptr bias,
          int device, CUstream stream) {
  queue_product(p, a, b, d, bias, device, stream, 0);
}

void warm_gemm(const GemmProblem& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr d, CUdeviceptr bias,
               int device, CUstream stream, CUdeviceptr workspace) {
  ZC_CHECK(workspace != 0, "a warm-up product without a workspace: " << describe(p));
  queue_product(p, a, b, d, bias, device, stream, workspace);
}

std::vector<GemmUse> planned_products(int device) {
  State& s = state();
  std::vector<std::pair<uint64_t, GemmUse>> made;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& [key, plan] : s.plans) {
      if (key.device != device) continue;
      made.push_back({plan->serial,
                      GemmUse{key.problem, key.align, plan->ran.load(std::memory_order_relaxed)}});
    }
  }
  std::sort(made.begin(), made.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<GemmUse> out;
  for (auto& m : made) out.push_back(m.second);
  return out;
}

BlasLtStats blaslt_stats() {
  State& s = state();
  BlasLtStats out;
  out.products = s.products.load(std::memory_order_relaxed);
  out.heuristic_runs = s.heuristic_runs.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mu);
  out.plans = s.plans.size();
  return out;
}

}  // namespace zc::cuda
