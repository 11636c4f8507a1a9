// One row-major GemmProblem as cuBLASLt's column-major product D^T = B^T A^T: the descriptors
// of the operation, of the three matrices and of the heuristic's preferences, made and owned
// together. Making them needs the library but no GPU (no handle), so they are checked where no
// GPU is.
//
// The mapping. A row-major [R, C] matrix with row stride ld is, read column-major, the [C, R]
// matrix with leading dimension ld: its transpose, in place. So cuBLASLt's A is zc's B: stored
// [K, N] it reads as B^T ([N, K], not transposed again); stored [N, K] (trans_b) it reads as B
// and is transposed by the operation. Likewise cuBLASLt's B is zc's A, and D is D^T, [N, M]
// with leading dimension ldd. C is D (beta is 0, so it is never read).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cuda/blaslt.h"
#include "cuda/blaslt_library.h"

namespace zc::cuda {

// The alignment of a product's pointers (GemmAlignment, in blaslt.h). An operand's batch stride
// counts as part of its pointer: item i starts at pointer + i * stride.
GemmAlignment gemm_alignment(const GemmProblem& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr d,
                             CUdeviceptr bias);

// Why `p` is malformed (mismatched or unsupported dtypes, negative sizes, overlapping rows),
// empty when it is not: what check_gemm_problem reports as a caller's bug, and a products record
// read from the cache (runtime/records/gemm_record.h) as a bad record.
std::string gemm_problem_fault(const GemmProblem& p);
// Raises what gemm() documents for a malformed problem or one too large for cuBLASLt.
void check_gemm_problem(const GemmProblem& p);

struct GemmDescriptors {
  // The product `p` (checked, with M, N, K and batch above 0) whose pointers have the
  // alignment `align`; `bias` is set as the bias pointer, which the heuristic reads for its
  // alignment. Raises zc::Error naming the problem when cuBLASLt refuses a descriptor.
  GemmDescriptors(const BlasLt& lt, const GemmProblem& p, const GemmAlignment& align,
                  CUdeviceptr bias);

  // Points the operation at another bias vector (one of the same alignment class).
  void set_bias(CUdeviceptr bias);

  template <class T>
  using Owned = std::unique_ptr<T, cublasStatus_t (*)(T*)>;
  const BlasLt& lt;
  GemmProblem problem;
  Owned<cublasLtMatmulDescOpaque_t> op{nullptr, nullptr};
  Owned<cublasLtMatrixLayoutOpaque_t> lt_a{nullptr, nullptr};  // zc's B
  Owned<cublasLtMatrixLayoutOpaque_t> lt_b{nullptr, nullptr};  // zc's A
  Owned<cublasLtMatrixLayoutOpaque_t> lt_d{nullptr, nullptr};  // D, also as C
  Owned<cublasLtMatmulPreferenceOpaque_t> preference{nullptr, nullptr};
};

}  // namespace zc::cuda
