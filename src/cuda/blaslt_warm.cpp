#include "cuda/blaslt_warm.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>

#include "cuda/device.h"
#include "cuda/driver.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/dtype.h"

namespace zc::cuda {

namespace {

std::atomic<WarmSource> g_source{nullptr};

constexpr size_t kMaxScratchBytes = size_t{1} << 30;

// Bytes an operand spans, from its first element: batch items `stride` apart, each `rows` rows
// `ld` apart (a row's length is at most ld, which check_gemm_problem ensures).
size_t span_bytes(int64_t rows, int64_t ld, int64_t batch, int64_t stride, DType dtype) {
  const int64_t elements = (batch - 1) * stride + rows * ld;
  return static_cast<size_t>(std::max<int64_t>(elements, 1)) * dtype_size(dtype);
}

struct Spans {
  size_t a = 0, b = 0, d = 0, bias = 0;
};

Spans spans_of(const GemmProblem& p) {
  Spans s;
  s.a = span_bytes(p.trans_a ? p.K : p.M, p.lda, p.batch, p.stride_a, p.a);
  s.b = span_bytes(p.trans_b ? p.N : p.K, p.ldb, p.batch, p.stride_b, p.b);
  s.d = span_bytes(p.M, p.ldd, p.batch, p.stride_d, p.d);
  s.bias = static_cast<size_t>(p.N) * dtype_size(p.d);
  return s;
}

// Device memory of this thread's, freed when it goes (after the stream has been waited for).
struct Scratch {
  CUdeviceptr ptr = 0;
  explicit Scratch(size_t bytes) {
    check(driver().cuMemAlloc(&ptr, bytes), "allocating scratch for cuBLASLt's warm-up");
  }
  ~Scratch() {
    if (ptr) driver().cuMemFree(ptr);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

struct Stream {
  CUstream s = nullptr;
  Stream() { check(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "a warm-up stream"); }
  ~Stream() {
    if (s) {
      driver().cuStreamSynchronize(s);
      driver().cuStreamDestroy(s);
    }
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

// A pointer `align` bytes past a 256-byte boundary has exactly that alignment when it is below
// 256: base is from cuMemAlloc, which aligns to at least 256.
CUdeviceptr aligned_as(CUdeviceptr base, uint32_t align) {
  return base + (align < 256 ? align : 0);
}

}  // namespace

void set_warm_source(WarmSource source) {
  g_source.store(source, std::memory_order_release);
}

WarmSource warm_source() {
  return g_source.load(std::memory_order_acquire);
}

int warm_products(int device, std::span<const GemmUse> products) {
  Timer timer;
  std::vector<const GemmUse*> todo;
  Spans most;
  for (const GemmUse& u : products) {
    const GemmProblem& p = u.problem;
    if (p.M <= 0 || p.N <= 0 || p.K <= 0 || p.batch <= 0) continue;  // no kernel to load
    const Spans s = spans_of(p);
    if (s.a + s.b + s.d + s.bias + 1024 > kMaxScratchBytes) continue;
    most.a = std::max(most.a, s.a), most.b = std::max(most.b, s.b);
    most.d = std::max(most.d, s.d), most.bias = std::max(most.bias, s.bias);
    todo.push_back(&u);
  }
  if (todo.empty()) return 0;
  use_device(device);
  int ran = 0;
  try {
    // Operands are read uninitialized: whatever they hold, a product only computes with it, and
    // the result is never read. One buffer per operand, each 256 bytes longer for alignment.
    Scratch a(most.a + 256), b(most.b + 256), d(most.d + 256), bias(most.bias + 256);
    Scratch workspace(kBlasLtWorkspaceBytes);
    Stream stream;
    for (const GemmUse* u : todo) {
      try {
        warm_gemm(u->problem, aligned_as(a.ptr, u->align.a), aligned_as(b.ptr, u->align.b),
                  aligned_as(d.ptr, u->align.d), aligned_as(bias.ptr, u->align.bias), device,
                  stream.s, workspace.ptr);
        ++ran;
      } catch (const std::exception& e) {
        ZC_LOG(timing) << "cuBLASLt warm-up skipped " << describe(u->problem) << ": " << e.what();
      }
    }
    check(driver().cuStreamSynchronize(stream.s), "cuBLASLt's warm-up");
  } catch (const std::exception& e) {
    ZC_LOG(timing) << "cuBLASLt warm-up on cuda:" << device << " stopped: " << e.what();
  }
  ZC_LOG(timing) << "cuBLASLt warm-up on cuda:" << device << ": " << ran << " of "
                 << products.size() << " products in " << timer.ms() << " ms";
  return ran;
}

}  // namespace zc::cuda
