#include "cpu/blas.h"

#include <cblas.h>
#include <omp.h>

#include <cstdio>
#include <vector>

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include "cpu/bf16_gemm.h"
#include "cpu/threads.h"
#include "util/env.h"

namespace zc::cpu {

namespace {

bool f32_to_dnnl() {
#ifdef ZC_WITH_DNNL
  static const bool dnnl = [] {
    const std::optional<std::string> v = env::non_empty(env::Var::cpu_gemm);
    if (!v || *v == "onednn") return true;
    if (*v == "openblas") return false;
    // Read inside a product, where no error can be raised: said once, and the default kept.
    std::fprintf(stderr, "zc: ZC_CPU_GEMM='%s' is not 'onednn' or 'openblas'; using oneDNN\n",
                 v->c_str());
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
  sgemm_on(default_f32_library(), ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

void dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
           const double* b, int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans(ta), trans(tb), m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

bool share_batch_out(int64_t count, int64_t multiply_adds) {
  // Multiply-adds below which one product is not worth splitting among threads (a 64x64x16).
  constexpr int64_t kSmallProduct = 65536;
  // Multiply-adds a thread's part of one product should have at least (2 MFLOP, tens of
  // microseconds of a core):
  // below it the library's fork and join on every product of the batch outweigh its work, and
  // the products are better shared out even where fewer than the threads. (ViT-S's attention,
  // 12 products of 197x197x64 on 16 threads, took 22 ms a batch one product at a time, 50 times
  // its sharing out.)
  constexpr int64_t kThreadGrain = int64_t{1} << 20;
  const int64_t threads = omp_get_max_threads();
  return count > 1 && (count >= threads || multiply_adds <= kSmallProduct ||
                       multiply_adds < kThreadGrain * threads);
}

namespace {

// Sets this thread's OpenMP team to `choice`'s share of it for one call of `multiply_adds`,
// and back. The default choice sizes its team by the work (cpu::work_team: a small product
// runs on one thread); a tuned one keeps the share it was timed with.
class ChoiceTeam {
 public:
  ChoiceTeam(GemmChoice choice, int64_t multiply_adds) : before_(omp_get_max_threads()) {
    threads_ = choice.threads(before_);
    if (choice.library == GemmChoice::Library::standard && choice.shift == 0 &&
        choice.batch == GemmChoice::Batch::standard) {
      threads_ = work_team(threads_, multiply_adds);
    }
    if (threads_ != before_) omp_set_num_threads(threads_);
  }
  ~ChoiceTeam() {
    if (threads_ != before_) omp_set_num_threads(before_);
  }
  ChoiceTeam(const ChoiceTeam&) = delete;
  ChoiceTeam& operator=(const ChoiceTeam&) = delete;

 private:
  int before_, threads_;
};

GemmLibrary library_of(GemmChoice choice) {
  switch (choice.library) {
    case GemmChoice::Library::openblas:
      return GemmLibrary::openblas;
    case GemmChoice::Library::onednn:
    case GemmChoice::Library::onednn_packed:  // where no B is kept: the same library on B as given
      return has_gemm_library(GemmLibrary::onednn) ? GemmLibrary::onednn : GemmLibrary::openblas;
    case GemmChoice::Library::standard:
      break;
  }
  return default_f32_library();
}

// The products of a batch (generated code's {count, strides...} dims after their number).
int64_t batch_products(const int64_t* batch) {
  int64_t total = 1;
  for (int64_t d = 0; d < batch[0]; ++d) total *= batch[1 + 4 * d];
  return total;
}

template <class T, class Gemm>
void gemm_batch(GemmChoice::Batch how, int64_t m, int64_t n, int64_t k, const T* a, const T* b,
                T* c, const int64_t* batch, Gemm gemm) {
  const int nd = static_cast<int>(batch[0]);
  const int64_t total = batch_products(batch);
  if (total <= 0) return;
  const bool out = how == GemmChoice::Batch::standard ? share_batch_out(total, m * n * k)
                                                      : how == GemmChoice::Batch::shared_out;
  cpu::parallel_for_if(out && total > 1, total, [&](int64_t i) {
    int64_t oa = 0, ob = 0, oc = 0, rest = i;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t* dim = batch + 1 + 4 * d;
      int64_t at = rest % dim[0];
      rest /= dim[0];
      oa += at * dim[1];
      ob += at * dim[2];
      oc += at * dim[3];
    }
    gemm(a + oa, b + ob, c + oc);
  });
}

}  // namespace

GemmLibrary default_f32_library() {
  return f32_to_dnnl() ? GemmLibrary::onednn : GemmLibrary::openblas;
}

void sgemm_batch(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc, const int64_t* batch) {
  sgemm_batch_as(GemmChoice{}, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, batch);
}

void dgemm_batch(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double* c, int64_t ldc, const int64_t* batch) {
  dgemm_batch_as(GemmChoice{}, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, batch);
}

void sgemm_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  ChoiceTeam team(choice, m * n * k);
  if (choice.bf16 && bf16_pays(m, n, k) && sgemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, c, ldc))
    return;
  sgemm_on(library_of(choice), ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

void product_then_epilogue(GemmLibrary lib, bool bf16, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                           float* c, int64_t ldc, const GemmEpilogue& e) {
  auto product = [&](float* out, int64_t ldo) {
    if (bf16 && sgemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, out, ldo)) return;
    sgemm_on(lib, ta, tb, m, n, k, a, lda, b, ldb, out, ldo);
  };
  if (!output_is_read(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, e)) {
    product(c, ldc);
    apply_epilogue(m, n, c, ldc, c, ldc, e);
    return;
  }
  std::vector<float> tmp(static_cast<size_t>(m * n));
  product(tmp.data(), n);
  apply_epilogue(m, n, tmp.data(), n, c, ldc, e);
}

void sgemm_ex(GemmChoice choice, const OnednnMatmul* site, WeightIdentity b_id, bool ta, bool tb,
              int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc, const GemmEpilogue& e) {
  ChoiceTeam team(choice, m * n * k);
  const bool bf16 = choice.bf16 && bf16_pays(m, n, k);
  const GemmLibrary lib = library_of(choice);
  const bool packed = choice.library == GemmChoice::Library::onednn_packed;
  // A small product with an epilogue runs as dnnl_sgemm and a loop over C: oneDNN's matmul
  // primitive, which would fuse the epilogue, costs about 1 us a call more at such sizes (an
  // LSTM step's 2x96x24 product with the input's share added: 1.3 -> 0.8 us, the zoo's LSTM
  // 0.101 -> 0.068 ms a call on the 2-core machine).
  constexpr int64_t kFusedEpilogueMacs = 1 << 15;
  if (site && !bf16 && lib == GemmLibrary::onednn &&
      (packed || (!e.empty() && m * n * k >= kFusedEpilogueMacs))) {
    return site->run(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, e, packed ? b_id : WeightIdentity{});
  }
  product_then_epilogue(lib, bf16, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, e);
}

void dgemm_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a,
              int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  ChoiceTeam team(choice, m * n * k);
  dgemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

void sgemm_batch_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                    const int64_t* batch) {
  ChoiceTeam team(choice, batch_products(batch) * m * n * k);
  const GemmLibrary lib = library_of(choice);
  const bool bf16 = choice.bf16 && bf16_pays(m, n, k);
  gemm_batch(choice.batch, m, n, k, a, b, c, batch,
             [&](const float* ai, const float* bi, float* ci) {
               if (bf16 && sgemm_bf16(ta, tb, m, n, k, ai, lda, bi, ldb, ci, ldc)) return;
               sgemm_on(lib, ta, tb, m, n, k, ai, lda, bi, ldb, ci, ldc);
             });
}

void dgemm_batch_as(GemmChoice choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const double* a, int64_t lda, const double* b, int64_t ldb, double* c,
                    int64_t ldc, const int64_t* batch) {
  ChoiceTeam team(choice, batch_products(batch) * m * n * k);
  gemm_batch(choice.batch, m, n, k, a, b, c, batch,
             [&](const double* ai, const double* bi, double* ci) {
               dgemm(ta, tb, m, n, k, ai, lda, bi, ldb, ci, ldc);
             });
}

std::string gemm_library_versions() {
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
  return "f32: " + f32 + "; f64 and the rest: " + openblas_get_config();
}

std::string gemm_libraries() {
  // The config string names the build; the thread count is what this process will use.
  return gemm_library_versions() + " (threads: " + std::to_string(openblas_get_num_threads()) +
         "); bf16 products (MatmulPrecision::Bf16): " +
         (bf16_gemm_available() ? "yes" : "no, they stay f32 (oneDNN has no bf16 matmul here)");
}

}  // namespace zc::cpu
