// f32 products whose right operand stays the same between calls (a Linear's weight), run on
// oneDNN's matmul primitive with B converted once into the layout the primitive asks for and
// kept while B's identity (ops/weight_identity.h) stays: what GemmChoice::Library::
// onednn_packed runs. dnnl_sgemm, the default, packs B into its own blocks on every call; on
// the GPU host's AVX-512 CPU the primitive's brgemm kernels on a kept B ran gpt-small's
// products up to 1.6x faster and gpt12's no faster, on this project's AVX2 machine at the same
// rate (docs/codegen.md "Packed weights"). So it is a candidate max_autotune times per product
// on the machine (runtime/autotune.h), never the default.
#pragma once

#include <cstdint>
#include <memory>

#include "ops/weight_identity.h"

namespace zc::ops {

// Whether this build can run packed products: it has oneDNN.
bool packed_gemm_available();

// One call site's packed products: its primitives by problem and its kept B copies by B's
// address (a repeated block's executable serves every instance of the block, each with a weight
// of its own). Safe to run from many threads at once.
class PackedGemm {
 public:
  // When a B is first converted: at the second call that meets the same address and identity
  // (a compiled call site: a value that changes every call, an activation, is never copied and
  // kept), or at the first (a tuner timing one B over and over).
  enum class Keep { second_sight, first_sight };

  explicit PackedGemm(Keep keep = Keep::second_sight);
  ~PackedGemm();
  PackedGemm(const PackedGemm&) = delete;
  PackedGemm& operator=(const PackedGemm&) = delete;

  // Row-major C[m, n] = op(A) op(B), as ops::sgemm, on the calling thread's OpenMP team. With
  // B's identity unknown, or before B is kept, or where oneDNN refuses the problem, it runs as
  // oneDNN's dnnl_sgemm would: the same product, B packed for this call only.
  void run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, WeightIdentity b_id) const;

  // How many times a B was converted and kept (a test's count).
  int64_t conversions() const;
  // How many B copies are kept now.
  int64_t kept() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace zc::ops
