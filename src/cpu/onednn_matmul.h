// f32 library products through oneDNN's matmul primitive, one call site at a time: the
// product's epilogue (a bias row, a residual, then ReLU or GELU) fused as the primitive's
// post-ops, and, where max_autotune chose it (GemmChoice::Library::onednn_packed), a B that
// stays the same between calls (a Linear's weight) converted once into the primitive's layout
// and kept while its identity (cpu/weight_identity.h) stays.
//
// Why: generated code used to run the product through dnnl_sgemm, then its epilogue as a loop
// over C in memory. That second pass costs as much as a third of the product on gpt-small's
// shapes (512x1024x256 with bias and GELU: 1142 us as sgemm and loop against 859 us fused, 771
// us fused on a kept B; 2 threads, this project's VM), because C leaves the cache between them.
// dnnl_sgemm also packs B into its blocks on every call; a kept B saves that where it measures
// faster, which max_autotune decides per product and machine (docs/codegen.md, docs/adr/0031).
#pragma once

#include <cstdint>
#include <memory>

#include "cpu/gemm_epilogue.h"
#include "cpu/weight_identity.h"

namespace zc::cpu {

// Whether this build has oneDNN's matmul (it has oneDNN).
bool onednn_matmul_available();

// One call site's primitives, by problem and epilogue, and its kept B copies by B's address (a
// repeated block's executable serves every instance of the block, each with a weight of its
// own). Safe to run from many threads at once.
class OnednnMatmul {
 public:
  // When a B is first converted and kept: at the second call that meets the same address and
  // identity (a compiled call site: a value that changes every call, an activation, is never
  // copied and kept), or at the first (a tuner timing one B over and over).
  enum class Keep { second_sight, first_sight };

  explicit OnednnMatmul(Keep keep = Keep::second_sight);
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;

  // Row-major C[m, n] = epilogue(op(A) op(B)), as cpu::sgemm then apply_epilogue, on the calling
  // thread's OpenMP team. `keep_b` known: B may be kept (see Keep); unknown: B is read as given.
  // A problem oneDNN refuses runs as dnnl_sgemm (or OpenBLAS) and apply_epilogue.
  void run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, const GemmEpilogue& epilogue,
           WeightIdentity keep_b) const;

  // How many times a B was converted and kept (a test's count).
  int64_t conversions() const;
  // How many B copies are kept now.
  int64_t kept() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace zc::cpu
