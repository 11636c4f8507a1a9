#include "ops/blas.h"

#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace zc::ops {

namespace {

bool f32_to_dnnl() {
#ifdef ZC_WITH_DNNL
  static const bool dnnl = [] {
    const char* v = std::getenv("ZC_CPU_GEMM");
    if (!v || !*v || std::strcmp(v, "onednn") == 0) return true;
    if (std::strcmp(v, "openblas") == 0) return false;
    // Read inside a product, where no error can be raised: said once, and the default kept.
    std::fprintf(stderr, "zc: ZC_CPU_GEMM='%s' is not 'onednn' or 'openblas'; using oneDNN\n", v);
    return true;
  }();
  return dnnl;
#else
  return false;
#endif
}

CBLAS_TRANSPOSE trans(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

std::string openblas() {
  // The config string names the build; the thread count is what this process will use.
  return std::string(openblas_get_config()) +
         " (threads: " + std::to_string(openblas_get_num_threads()) + ")";
}

}  // namespace

bool has_gemm_library(GemmLibrary lib) {
#ifdef ZC_WITH_DNNL
  return lib == GemmLibrary::openblas || lib == GemmLibrary::onednn;
#else
  return lib == GemmLibrary::openblas;
#endif
}

void sgemm_on(GemmLibrary lib, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
#ifdef ZC_WITH_DNNL
  // oneDNN checks its arguments and fails only on ones OpenBLAS would reject too, or when it
  // cannot allocate its packing buffers: OpenBLAS then computes the product.
  if (lib == GemmLibrary::onednn && dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.f, a, lda,
                                               b, ldb, 0.f, c, ldc) == dnnl_success) {
    return;
  }
#else
  (void)lib;
#endif
  cblas_sgemm(CblasRowMajor, trans(ta), trans(tb), m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);
}

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc) {
  sgemm_on(f32_to_dnnl() ? GemmLibrary::onednn : GemmLibrary::openblas, ta, tb, m, n, k, a, lda, b,
           ldb, c, ldc);
}

void dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
           const double* b, int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans(ta), trans(tb), m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

std::string gemm_libraries() {
  std::string f32 = "OpenBLAS";
#ifdef ZC_WITH_DNNL
  if (f32_to_dnnl()) {
    const dnnl_version_t* v = dnnl_version();
    f32 = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
          std::to_string(v->patch) + " (dnnl_sgemm)";
  } else {
    f32 = "OpenBLAS (ZC_CPU_GEMM=openblas)";
  }
#endif
  return "f32: " + f32 + "; f64 and the rest: " + openblas();
}

}  // namespace zc::ops
