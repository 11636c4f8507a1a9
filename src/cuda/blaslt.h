// Matrix products on a GPU through cuBLASLt, row-major as the rest of zc:
//
//   D[i] = act(alpha * A[i] @ B[i] + bias)   for i in [0, batch)
//
// cuBLASLt is column-major; a row-major matrix is the column-major view of its transpose, so
// the product is asked as D^T = B^T A^T: the operands swap places and M and N swap, and no data
// moves. The bias, a vector of N elements, is then the column vector cuBLASLt adds to each
// column of D^T, which is each row of D.
//
// Every distinct problem (its dtypes, sizes, transposes, leading dimensions, batch, strides,
// epilogue and TF32 permission), on each device and for each alignment class of its pointers, is
// planned once: descriptors made and an algorithm chosen by cuBLASLt's heuristic, kept for the
// process, so a product after the first costs a hash lookup and one cublasLtMatmul. The library
// itself is loaded by the first product; each device gets one handle and each stream a
// product runs on gets one workspace (32 MiB from the caching allocator, kept: two streams
// sharing one would race on it). All of it is thread-safe.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zc/dtype.h"

namespace zc::cuda {

// What follows the product, applied by cuBLASLt in the same kernel: bias (a vector of N
// elements of D's dtype) added to each row, then relu.
enum class Epilogue : uint8_t { none, bias, relu, bias_relu };

struct GemmProblem {
  // Operands: f32, f64, f16 or bf16, a and b alike; d is a's dtype, or f32 for f16/bf16 inputs.
  // f32 and f16/bf16 accumulate in f32, f64 in f64.
  DType a = DType::f32, b = DType::f32, d = DType::f32;
  int64_t M = 0, N = 0, K = 0;  // D is [M, N]; the sum runs over K
  // A is stored as [M, K] row-major, or as [K, M] when trans_a (the transposed view zc emits for
  // W^T); B as [K, N], or as [N, K] when trans_b.
  bool trans_a = false, trans_b = false;
  // Elements between consecutive rows of A, B and D as stored (at least a stored row's length).
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 1;
  // Elements between consecutive batch items; 0 uses the same matrix for every item (not D's).
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  Epilogue epilogue = Epilogue::none;
  // f32 inputs may be rounded to TF32 on tensor cores (about 10 bits of mantissa): faster, but
  // outside zc's numerics contract, which is full f32 unless a caller asks.
  bool allow_tf32 = false;
  // Scales the product (before the bias). Passed per call: problems that differ only in alpha
  // share a plan.
  double alpha = 1.0;

  bool operator==(const GemmProblem&) const = default;
};

// Bytes each pointer is aligned to, at most 256 (cuBLASLt's own assumption when not told), for
// zc's A, B, D and the bias: with the problem, what chooses a product's plan and so its kernel.
struct GemmAlignment {
  uint32_t a = 256, b = 256, d = 256, bias = 256;
  bool operator==(const GemmAlignment&) const = default;
};

// "f16 M=17 N=64 K=300 A^T lda=17 B ldb=64 ldd=64 batch=3 strides=0,19200,1088 bias_relu".
std::string describe(const GemmProblem& p);

// Queues the product on `stream` (a stream of `device`) and returns. a, b, d and bias are
// device addresses of the first element of A[0], B[0], D[0] and the bias (0 without a bias
// epilogue); any alignment works, the plan is chosen for the one given. Makes `device` current
// on this thread.
//
// Empty problems: with M, N or batch of 0 nothing is queued and nothing is written; with K of 0
// the sum is empty, so D = act(bias), or zeros without a bias, and a and b are not read.
//
// Raises zc::Error when there is no usable GPU or cuBLASLt, when a size exceeds what cuBLASLt
// takes (2^31 - 1), or when no cuBLASLt algorithm computes the problem; a malformed problem
// (leading dimension shorter than a row, unsupported dtypes, D's stride 0 in a batch) is a bug
// of the caller, reported by ZC_CHECK.
void gemm(const GemmProblem& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr d, CUdeviceptr bias,
          int device, CUstream stream);

// Loads the library, makes `device`'s handle and lets cuBLASLt run its one-time start (a
// heuristic query): what a process's first gemm() would otherwise spend, 100-200 ms, most of it
// in the library. Thread-safe; cheap once done. Raises what gemm() raises for a missing GPU or
// library. blaslt_start.h runs it on a background thread.
void prepare_blaslt(int device);

// A plan this process made on a device: its problem (alpha 1), its pointers' alignment, and
// whether a product other than a warm-up (warm_gemm) ran with it.
struct GemmUse {
  GemmProblem problem;
  GemmAlignment align;
  bool ran = false;
};
// Every plan made on `device`, in the order they were made.
std::vector<GemmUse> planned_products(int device);

// gemm() for loading a product's kernel ahead of its use (blaslt_warm.h): plans the problem
// for these pointers' alignment and queues it on `stream` with `workspace`
// (kBlasLtWorkspaceBytes of the caller's), without counting it as a product. An empty sum
// (K of 0) queues nothing.
void warm_gemm(const GemmProblem& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr d, CUdeviceptr bias,
               int device, CUstream stream, CUdeviceptr workspace);

// The workspace each stream gets, and the most a plan may use.
inline constexpr size_t kBlasLtWorkspaceBytes = size_t{32} << 20;

// Counts since the process started.
struct BlasLtStats {
  uint64_t products = 0;        // cublasLtMatmul calls queued, warm-ups (warm_gemm) aside
  uint64_t heuristic_runs = 0;  // cublasLtMatmulAlgoGetHeuristic calls: one per plan made
  uint64_t plans = 0;           // plans kept
};
BlasLtStats blaslt_stats();

}  // namespace zc::cuda
