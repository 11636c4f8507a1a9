#include "cuda/blaslt_descriptors.h"

#include <algorithm>
#include <limits>
#include <string>

#include "util/check.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {

bool has_bias(Epilogue e) {
  return e == Epilogue::bias || e == Epilogue::bias_relu;
}

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::none:
      return "none";
    case Epilogue::bias:
      return "bias";
    case Epilogue::relu:
      return "relu";
    case Epilogue::bias_relu:
      return "bias_relu";
  }
  return "?";
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f64:
      return CUDA_R_64F;
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      break;
  }
  ZC_CHECK(false, "cuBLASLt product of " << dtype_name(t) << " operands");
  return CUDA_R_32F;
}

cublasComputeType_t compute_type(const GemmProblem& p) {
  if (p.a == DType::f64) return CUBLAS_COMPUTE_64F;
  if (p.a == DType::f32 && p.allow_tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

uint32_t alignment_of(uint64_t address) {
  constexpr uint64_t kMax = 256;
  if (address == 0) return kMax;
  return static_cast<uint32_t>(std::min(address & (~address + 1), kMax));
}

uint32_t operand_alignment(CUdeviceptr ptr, int64_t stride, int64_t batch, DType t) {
  uint64_t bits = ptr;
  if (batch > 1) bits |= static_cast<uint64_t>(stride) * dtype_size(t);
  return alignment_of(bits);
}

// cuBLASLt's sizes and leading dimensions are 32-bit in practice, its batch count is.
void check_fits(const GemmProblem& p) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (int64_t v : {p.M, p.N, p.K, p.lda, p.ldb, p.ldd, p.batch}) {
    if (v > kMax) {
      throw Error(
          "a matrix product too large for cuBLASLt, whose sizes, leading dimensions "
          "and batch count are below 2^31: " +
          describe(p) + "; split it into smaller products");
    }
  }
}

}  // namespace

std::string describe(const GemmProblem& p) {
  std::string s = std::string(dtype_name(p.a));
  if (p.b != p.a) s += "x" + std::string(dtype_name(p.b));
  if (p.d != p.a) s += "->" + std::string(dtype_name(p.d));
  s += " M=" + std::to_string(p.M) + " N=" + std::to_string(p.N) + " K=" + std::to_string(p.K);
  s += std::string(p.trans_a ? " A^T" : " A") + " lda=" + std::to_string(p.lda);
  s += std::string(p.trans_b ? " B^T" : " B") + " ldb=" + std::to_string(p.ldb);
  s += " ldd=" + std::to_string(p.ldd);
  if (p.batch != 1) {
    s += " batch=" + std::to_string(p.batch) + " strides=" + std::to_string(p.stride_a) + "," +
         std::to_string(p.stride_b) + "," + std::to_string(p.stride_d);
  }
  if (p.epilogue != Epilogue::none) s += std::string(" ") + epilogue_name(p.epilogue);
  if (p.allow_tf32) s += " tf32";
  return s;
}

std::string gemm_problem_fault(const GemmProblem& p) {
  auto fault = [&](const char* what) { return what + (": " + describe(p)); };
  if (p.a != p.b) return fault("cuBLASLt operands of different dtypes");
  if (p.a != DType::f32 && p.a != DType::f64 && p.a != DType::f16 && p.a != DType::bf16) {
    return fault("cuBLASLt product of unsupported dtype");
  }
  if (p.d != p.a && !(p.d == DType::f32 && (p.a == DType::f16 || p.a == DType::bf16))) {
    return fault("cuBLASLt product with an unsupported output dtype");
  }
  if (p.M < 0 || p.N < 0 || p.K < 0 || p.batch < 0) {
    return fault("negative size in a cuBLASLt product");
  }
  if (p.stride_a < 0 || p.stride_b < 0 || p.stride_d < 0) {
    return fault("negative batch stride in a cuBLASLt product");
  }
  if (p.M == 0 || p.N == 0 || p.batch == 0) return {};
  if (p.ldd < p.N) return fault("D's rows overlap (ldd below N)");
  if (p.batch != 1 && p.stride_d == 0) return fault("every batch item writes the same D");
  if (p.K > 0 && p.lda < (p.trans_a ? p.M : p.K)) return fault("A's rows overlap");
  if (p.K > 0 && p.ldb < (p.trans_b ? p.K : p.N)) return fault("B's rows overlap");
  return {};
}

void check_gemm_problem(const GemmProblem& p) {
  const std::string fault = gemm_problem_fault(p);
  ZC_CHECK(fault.empty(), "" << fault);
  if (p.M == 0 || p.N == 0 || p.batch == 0) return;
  check_fits(p);
}

GemmAlignment gemm_alignment(const GemmProblem& p, CUdeviceptr a, CUdeviceptr b, CUdeviceptr d,
                             CUdeviceptr bias) {
  GemmAlignment out;
  out.a = operand_alignment(a, p.stride_a, p.batch, p.a);
  out.b = operand_alignment(b, p.stride_b, p.batch, p.b);
  out.d = operand_alignment(d, p.stride_d, p.batch, p.d);
  if (has_bias(p.epilogue)) out.bias = alignment_of(bias);
  return out;
}

GemmDescriptors::GemmDescriptors(const BlasLt& library, const GemmProblem& p,
                                 const GemmAlignment& align, CUdeviceptr bias)
    : lt(library), problem(p) {
  const std::string what = " for the cuBLASLt product " + describe(p);
  auto check = [&](cublasStatus_t s, const char* call) { check_blaslt(s, call + what); };

  cublasLtMatmulDesc_t raw_op = nullptr;
  const cudaDataType_t scale = p.a == DType::f64 ? CUDA_R_64F : CUDA_R_32F;
  check(lt.cublasLtMatmulDescCreate(&raw_op, compute_type(p), scale), "cublasLtMatmulDescCreate");
  op = Owned<cublasLtMatmulDescOpaque_t>(raw_op, lt.cublasLtMatmulDescDestroy);
  auto set_op = [&](cublasLtMatmulDescAttributes_t attr, const auto& value, const char* name) {
    check(lt.cublasLtMatmulDescSetAttribute(op.get(), attr, &value, sizeof(value)), name);
  };
  // The operands swap: cuBLASLt's A is zc's B, so its transpose is trans_b, and B's is trans_a.
  const int32_t trans_lt_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t trans_lt_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_op(CUBLASLT_MATMUL_DESC_TRANSA, trans_lt_a, "CUBLASLT_MATMUL_DESC_TRANSA");
  set_op(CUBLASLT_MATMUL_DESC_TRANSB, trans_lt_b, "CUBLASLT_MATMUL_DESC_TRANSB");
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (p.epilogue) {
    case Epilogue::none:
      break;
    case Epilogue::bias:
      epilogue = CUBLASLT_EPILOGUE_BIAS;
      break;
    case Epilogue::relu:
      epilogue = CUBLASLT_EPILOGUE_RELU;
      break;
    case Epilogue::bias_relu:
      epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
      break;
  }
  set_op(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, "CUBLASLT_MATMUL_DESC_EPILOGUE");
  if (has_bias(p.epilogue)) set_bias(bias);

  auto layout = [&](DType t, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
    cublasLtMatrixLayout_t raw = nullptr;
    check(lt.cublasLtMatrixLayoutCreate(&raw, data_type(t), static_cast<uint64_t>(rows),
                                        static_cast<uint64_t>(cols), ld),
          "cublasLtMatrixLayoutCreate");
    Owned<cublasLtMatrixLayoutOpaque_t> owned(raw, lt.cublasLtMatrixLayoutDestroy);
    if (p.batch > 1) {
      const int32_t count = static_cast<int32_t>(p.batch);
      check(lt.cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof(count)),
            "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
      check(lt.cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof(stride)),
            "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET");
    }
    return owned;
  };
  // Column-major shapes as stored, before the operation's transposes.
  lt_a = layout(p.b, p.trans_b ? p.K : p.N, p.trans_b ? p.N : p.K, p.ldb, p.stride_b);
  lt_b = layout(p.a, p.trans_a ? p.M : p.K, p.trans_a ? p.K : p.M, p.lda, p.stride_a);
  lt_d = layout(p.d, p.N, p.M, p.ldd, p.stride_d);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  check(lt.cublasLtMatmulPreferenceCreate(&raw_pref), "cublasLtMatmulPreferenceCreate");
  preference =
      Owned<cublasLtMatmulPreferenceOpaque_t>(raw_pref, lt.cublasLtMatmulPreferenceDestroy);
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value,
                      const char* name) {
    check(lt.cublasLtMatmulPreferenceSetAttribute(raw_pref, attr, &value, sizeof(value)), name);
  };
  const uint64_t workspace = kBlasLtWorkspaceBytes;
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace,
           "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.b,
           "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES");
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.a,
           "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES");
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align.d,
           "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES");
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.d,
           "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES");
}

void GemmDescriptors::set_bias(CUdeviceptr bias) {
  const void* ptr = reinterpret_cast<const void*>(static_cast<uintptr_t>(bias));
  check_blaslt(lt.cublasLtMatmulDescSetAttribute(op.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr,
                                                 sizeof(ptr)),
               "CUBLASLT_MATMUL_DESC_BIAS_POINTER for the cuBLASLt product " + describe(problem));
}

}  // namespace zc::cuda
