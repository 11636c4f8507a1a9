// The row-major to column-major mapping, checked without a GPU: the descriptors zc makes are
// read back through cuBLASLt's own getters, a host emulation of cuBLASLt's documented product
// (column-major, op(A) op(B), strided batches, bias per row of D, relu) runs on what they say,
// and its result must be zc's row-major product, element for element, including what it leaves
// untouched. Types, compute and scale types, alignments and the bias pointer are read back too.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "zc/cuda.h"

#ifdef ZC_WITH_CUDA
#include "cuda/blaslt.h"
#include "cuda/blaslt_descriptors.h"
#include "cuda/blaslt_library.h"
#endif

namespace {

#ifdef ZC_WITH_CUDA

using zc::DType;
using zc::cuda::Epilogue;
using zc::cuda::GemmDescriptors;
using zc::cuda::GemmProblem;

// The getters, which zc itself never needs, from the library blaslt() loaded.
struct Getters {
  decltype(&::cublasLtMatrixLayoutGetAttribute) layout = nullptr;
  decltype(&::cublasLtMatmulDescGetAttribute) op = nullptr;
  decltype(&::cublasLtMatmulPreferenceGetAttribute) preference = nullptr;
};

Getters getters(const zc::cuda::BlasLt& lt) {
  Getters g;
  void* lib = dlopen(lt.path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return g;
  g.layout = reinterpret_cast<decltype(g.layout)>(dlsym(lib, "cublasLtMatrixLayoutGetAttribute"));
  g.op = reinterpret_cast<decltype(g.op)>(dlsym(lib, "cublasLtMatmulDescGetAttribute"));
  g.preference =
      reinterpret_cast<decltype(g.preference)>(dlsym(lib, "cublasLtMatmulPreferenceGetAttribute"));
  return g;
}

// One attribute of the exact size the library stores.
template <class T, class Get, class Desc, class Attr>
T get(Get fn, Desc desc, Attr attr) {
  T value{};
  size_t written = 0;
  EXPECT_EQ(fn(desc, attr, &value, sizeof(value), &written), CUBLAS_STATUS_SUCCESS) << attr;
  EXPECT_EQ(written, sizeof(value)) << attr;
  return value;
}

struct Layout {
  uint32_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride;
  double at(const std::vector<double>& mem, int64_t b, uint64_t r, uint64_t c) const {
    return mem[b * stride + static_cast<int64_t>(c) * ld + static_cast<int64_t>(r)];
  }
};

Layout read_layout(const Getters& g, cublasLtMatrixLayout_t l) {
  Layout out;
  out.type = get<uint32_t>(g.layout, l, CUBLASLT_MATRIX_LAYOUT_TYPE);
  out.rows = get<uint64_t>(g.layout, l, CUBLASLT_MATRIX_LAYOUT_ROWS);
  out.cols = get<uint64_t>(g.layout, l, CUBLASLT_MATRIX_LAYOUT_COLS);
  out.ld = get<int64_t>(g.layout, l, CUBLASLT_MATRIX_LAYOUT_LD);
  out.batch = get<int32_t>(g.layout, l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
  out.stride = get<int64_t>(g.layout, l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
  return out;
}

// cuBLASLt's product as its documentation defines it, on the descriptors: D = act(alpha op(A)
// op(B) + bias), column-major, where cuBLASLt's A holds zc's B and its B holds zc's A.
std::vector<double> emulate(const Getters& g, const GemmDescriptors& d, double alpha,
                            const std::vector<double>& lt_a_mem,
                            const std::vector<double>& lt_b_mem, std::vector<double> out,
                            const std::vector<double>& bias) {
  const Layout A = read_layout(g, d.lt_a.get()), B = read_layout(g, d.lt_b.get());
  const Layout D = read_layout(g, d.lt_d.get());
  const bool ta = get<int32_t>(g.op, d.op.get(), CUBLASLT_MATMUL_DESC_TRANSA) == CUBLAS_OP_T;
  const bool tb = get<int32_t>(g.op, d.op.get(), CUBLASLT_MATMUL_DESC_TRANSB) == CUBLAS_OP_T;
  const uint32_t epilogue = get<uint32_t>(g.op, d.op.get(), CUBLASLT_MATMUL_DESC_EPILOGUE);
  const uint64_t m = ta ? A.cols : A.rows, k = ta ? A.rows : A.cols;
  const uint64_t n = tb ? B.rows : B.cols;
  EXPECT_EQ(tb ? B.cols : B.rows, k);
  EXPECT_EQ(D.rows, m);
  EXPECT_EQ(D.cols, n);
  EXPECT_TRUE(A.batch == D.batch && B.batch == D.batch);
  const bool add_bias =
      epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const bool relu = epilogue == CUBLASLT_EPILOGUE_RELU || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  for (int64_t b = 0; b < D.batch; ++b) {
    for (uint64_t r = 0; r < m; ++r) {
      for (uint64_t c = 0; c < n; ++c) {
        double s = 0;
        for (uint64_t i = 0; i < k; ++i) {
          s += (ta ? A.at(lt_a_mem, b, i, r) : A.at(lt_a_mem, b, r, i)) *
               (tb ? B.at(lt_b_mem, b, c, i) : B.at(lt_b_mem, b, i, c));
        }
        double v = alpha * s + (add_bias ? bias[r] : 0.0);
        if (relu) v = std::max(v, 0.0);
        out[b * D.stride + static_cast<int64_t>(c) * D.ld + static_cast<int64_t>(r)] = v;
      }
    }
  }
  return out;
}

// zc's row-major definition, on zc's operands.
std::vector<double> row_major(const GemmProblem& p, const std::vector<double>& a,
                              const std::vector<double>& b, std::vector<double> out,
                              const std::vector<double>& bias) {
  const bool add_bias = p.epilogue == Epilogue::bias || p.epilogue == Epilogue::bias_relu;
  const bool relu = p.epilogue == Epilogue::relu || p.epilogue == Epilogue::bias_relu;
  for (int64_t t = 0; t < p.batch; ++t) {
    for (int64_t i = 0; i < p.M; ++i) {
      for (int64_t j = 0; j < p.N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          s += a[t * p.stride_a + (p.trans_a ? k * p.lda + i : i * p.lda + k)] *
               b[t * p.stride_b + (p.trans_b ? j * p.ldb + k : k * p.ldb + j)];
        }
        double v = p.alpha * s + (add_bias ? bias[j] : 0.0);
        if (relu) v = std::max(v, 0.0);
        out[t * p.stride_d + i * p.ldd + j] = v;
      }
    }
  }
  return out;
}

std::vector<double> random_values(int64_t n, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

TEST(CudaBlasLtMapping, DescriptorsComputeTheRowMajorProduct) {
  std::string why;
  if (!zc::cuda::blaslt_found(&why)) GTEST_SKIP() << "no cuBLASLt here: " << why;
  const zc::cuda::BlasLt& lt = zc::cuda::blaslt();
  const Getters g = getters(lt);
  ASSERT_TRUE(g.layout && g.op && g.preference);
  std::mt19937 rng(7);
  int checked = 0;
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {3, 5, 7}, {17, 4, 9}, {6, 1, 13}, {1, 8, 2}}) {
    for (int variant = 0; variant < 4 * 2 * 3; ++variant) {
      const int trans = variant % 4, pad = variant / 4 % 2, batching = variant / 8;
      GemmProblem p;
      p.a = p.b = p.d = DType::f32;
      p.M = m, p.N = n, p.K = k;
      p.trans_a = (trans & 1) != 0;
      p.trans_b = (trans & 2) != 0;
      p.lda = (p.trans_a ? m : k) + 3 * pad;
      p.ldb = (p.trans_b ? k : n) + 2 * pad;
      p.ldd = n + 5 * pad;
      p.epilogue = static_cast<Epilogue>(variant % 4);
      p.alpha = variant % 2 ? -0.5 : 1.0;
      const int64_t a_item = (p.trans_a ? k : m) * p.lda, b_item = (p.trans_b ? n : k) * p.ldb;
      if (batching > 0) {
        p.batch = 3;
        p.stride_a = batching == 1 ? 0 : a_item + 1;  // broadcast A, then B
        p.stride_b = batching == 2 ? 0 : b_item + 2;
        p.stride_d = m * p.ldd + 4;
      }
      SCOPED_TRACE(zc::cuda::describe(p));
      const std::vector<double> a = random_values(a_item + (p.batch - 1) * p.stride_a, rng);
      const std::vector<double> b = random_values(b_item + (p.batch - 1) * p.stride_b, rng);
      const std::vector<double> bias = random_values(n, rng);
      const std::vector<double> d(m * p.ldd + (p.batch - 1) * p.stride_d, -3.5);
      const GemmDescriptors desc(lt, p, zc::cuda::GemmAlignment{}, 0x4000);
      const std::vector<double> want = row_major(p, a, b, d, bias);
      const std::vector<double> got = emulate(g, desc, p.alpha, b, a, d, bias);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-12 * (1 + std::fabs(want[i]))) << "element " << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * 24);
}

TEST(CudaBlasLtMapping, TypesAlignmentsAndBiasAreWhatTheProblemSays) {
  std::string why;
  if (!zc::cuda::blaslt_found(&why)) GTEST_SKIP() << "no cuBLASLt here: " << why;
  const zc::cuda::BlasLt& lt = zc::cuda::blaslt();
  const Getters g = getters(lt);
  ASSERT_TRUE(g.layout && g.op && g.preference);
  struct Case {
    DType in, out;
    bool tf32;
    int32_t compute, scale;
    uint32_t in_type, out_type;
  };
  for (const Case c :
       {Case{DType::f32, DType::f32, false, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},
        Case{DType::f32, DType::f32, true, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F,
             CUDA_R_32F},
        Case{DType::f64, DType::f64, true, CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F},
        Case{DType::f16, DType::f16, true, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F},
        Case{DType::bf16, DType::bf16, false, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF,
             CUDA_R_16BF},
        Case{DType::f16, DType::f32, false, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F,
             CUDA_R_32F}}) {
    GemmProblem p;
    p.a = p.b = c.in;
    p.d = c.out;
    p.M = 8, p.N = 16, p.K = 32;
    p.lda = 32, p.ldb = 16, p.ldd = 16;
    p.allow_tf32 = c.tf32;
    p.epilogue = Epilogue::bias_relu;
    SCOPED_TRACE(zc::cuda::describe(p));
    const GemmDescriptors d(lt, p, zc::cuda::GemmAlignment{2, 4, 8, 16}, 0x10010);
    EXPECT_EQ(get<int32_t>(g.op, d.op.get(), CUBLASLT_MATMUL_DESC_COMPUTE_TYPE), c.compute);
    EXPECT_EQ(get<int32_t>(g.op, d.op.get(), CUBLASLT_MATMUL_DESC_SCALE_TYPE), c.scale);
    EXPECT_EQ(get<uint32_t>(g.op, d.op.get(), CUBLASLT_MATMUL_DESC_EPILOGUE),
              static_cast<uint32_t>(CUBLASLT_EPILOGUE_RELU_BIAS));
    EXPECT_EQ(get<const void*>(g.op, d.op.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER),
              reinterpret_cast<const void*>(0x10010));
    EXPECT_EQ(read_layout(g, d.lt_a.get()).type, c.in_type);
    EXPECT_EQ(read_layout(g, d.lt_b.get()).type, c.in_type);
    EXPECT_EQ(read_layout(g, d.lt_d.get()).type, c.out_type);
    // cuBLASLt's A is zc's B (aligned to 4 here), its B zc's A (2); C and D are D (8).
    auto pref = [&](cublasLtMatmulPreferenceAttributes_t attr) {
      return get<uint32_t>(g.preference, d.preference.get(), attr);
    };
    EXPECT_EQ(pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES), 4u);
    EXPECT_EQ(pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES), 2u);
    EXPECT_EQ(pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES), 8u);
    EXPECT_EQ(pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES), 8u);
    EXPECT_EQ(
        get<uint64_t>(g.preference, d.preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES),
        zc::cuda::kBlasLtWorkspaceBytes);
  }
}

#endif

}  // namespace
