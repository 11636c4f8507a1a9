// Products on a weight kept packed across calls (ops/packed_gemm.h, GemmChoice::Library::
// onednn_packed): a weight is converted once per identity, a changed weight (a new version) is
// converted again and the result follows it, memory zc cannot vouch for is never kept, and
// compiled code whose products keep their weights stays right when the weights change.
#include <gtest/gtest.h>

#include "capture/capture.h"
#include "ops/blas.h"
#include "ops/packed_gemm.h"
#include "runtime/compile_graph.h"
#include "tensor/assign.h"
#include "test_support.h"
#include "unit/captured_args.h"
#include "util/stats.h"
#include "zc/zc.h"

namespace zc {
namespace {

ops::WeightIdentity identity_of(const Tensor& t) {
  const Storage& s = *t.impl_ptr()->storage;
  return {s.uid(), s.version()};
}

// C = A B^T through `packed`, as a Linear's product: A [m, k], B [n, k].
Tensor product(const ops::PackedGemm& packed, const Tensor& a, const Tensor& b,
               ops::WeightIdentity id) {
  Tensor c = Tensor::empty({a.size(0), b.size(0)});
  packed.run(false, true, a.size(0), b.size(0), a.size(1), a.data<float>(), a.size(1),
             b.data<float>(), b.size(1), c.data<float>(), b.size(0), id);
  return c;
}

TEST(PackedGemm, AWeightIsKeptFromItsSecondSightUntilItChanges) {
  if (!ops::packed_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  manual_seed(5);
  const Tensor a = randn({37, 19}), w = randn({23, 19});
  const Tensor want = matmul(a, w.t());
  ops::PackedGemm packed;
  EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want, 1e-5, 1e-5));
  EXPECT_EQ(packed.conversions(), 0);  // first sight: run as given
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want, 1e-5, 1e-5));
  }
  EXPECT_EQ(packed.conversions(), 1);
  EXPECT_EQ(packed.kept(), 1);
  // A new version of the same memory: seen anew, kept again at its second sight, never stale.
  assign_values(w, w * 2.0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want * 2.0, 1e-5, 1e-5)) << i;
  }
  EXPECT_EQ(packed.conversions(), 2);
  // Unknown memory is never kept; a value that changes identity every call never is either.
  for (int i = 0; i < 3; ++i) product(packed, a, w, {});
  for (int i = 0; i < 3; ++i) {
    const Tensor fresh = w.clone();
    EXPECT_TRUE(allclose(product(packed, a, fresh, identity_of(fresh)), want * 2.0, 1e-5, 1e-5));
  }
  EXPECT_EQ(packed.conversions(), 2);
  // Two weights at two addresses are both kept (a block's executable serves every instance).
  const Tensor w2 = randn({23, 19});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(allclose(product(packed, a, w2, identity_of(w2)), matmul(a, w2.t()), 1e-5, 1e-5));
    EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want * 2.0, 1e-5, 1e-5));
  }
  EXPECT_EQ(packed.conversions(), 3);
  EXPECT_GE(packed.kept(), 2);
}

TEST(PackedGemm, EveryLayoutEqualsTheProductAsGiven) {
  if (!ops::packed_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  manual_seed(6);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t m = 9, n = 70, k = 33, pad = 3;
      const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
      const Tensor a = randn({ta ? k : m, lda}), b = randn({tb ? n : k, ldb});
      Tensor want = zeros({m, ldc}), got = zeros({m, ldc});
      ops::sgemm_on(ops::GemmLibrary::openblas, ta, tb, m, n, k, a.data<float>(), lda,
                    b.data<float>(), ldb, want.data<float>(), ldc);
      ops::PackedGemm packed(ops::PackedGemm::Keep::first_sight);
      packed.run(ta, tb, m, n, k, a.data<float>(), lda, b.data<float>(), ldb, got.data<float>(),
                 ldc, identity_of(b));
      EXPECT_EQ(packed.conversions(), 1);
      // C's padding columns stay as they were.
      EXPECT_TRUE(allclose(got, want, 1e-5, 1e-5)) << ta << tb;
    }
  }
}

// Compiled code whose products keep their weights packed: right at every call, and right
// after the weight changes between calls.
TEST(PackedGemm, CompiledProductsFollowAChangedWeight) {
  if (!ops::packed_gemm_available()) GTEST_SKIP() << "this build has no oneDNN";
  NoGradGuard no_grad;
  manual_seed(7);
  const std::vector<Tensor> in{randn({4, 96, 64}), randn({80, 64})};
  const capture::Captured cap = capture::capture_function(
      in, [&] { return std::vector<Tensor>{gelu(matmul(in[0], in[1].t()))}; });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  auto exec = runtime::compile_graph(cap.graph, cpp);
  const std::vector<const Tensor*> args = test::captured_args(cap, in);
  const std::vector<codegen::LibraryProduct> products = exec->library_products();
  ASSERT_EQ(products.size(), 1u);
  EXPECT_TRUE(products[0].problem.b_weight) << products[0].problem.str();
  std::vector<uint8_t> choices = exec->product_choices();
  choices[static_cast<size_t>(products[0].site)] =
      ops::GemmChoice{ops::GemmChoice::Library::onednn_packed}.code();
  auto tuned = exec->with_product_choices(choices);
  auto kept = [] { return zc::stats::read(zc::stats::Counter::weights_kept); };
  const int64_t before = kept();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(tuned->run(args)[0], exec->run(args)[0], 1e-5, 1e-5)) << i;
  }
  EXPECT_EQ(kept() - before, 1);  // at the second call, once
  assign_values(in[1], in[1] * -0.5);
  const Tensor want = gelu(matmul(in[0], in[1].t()));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(allclose(tuned->run(args)[0], want, 1e-4, 1e-4)) << i;
  EXPECT_EQ(kept() - before, 2);
  // A B that is a new tensor at every call (an activation passed in) is never kept.
  for (int i = 0; i < 3; ++i) {
    const std::vector<Tensor> fresh{in[0], in[1].clone()};
    EXPECT_TRUE(allclose(tuned->run(test::captured_args(cap, fresh))[0], want, 1e-4, 1e-4));
  }
  EXPECT_EQ(kept() - before, 2);
}

}  // namespace
}  // namespace zc
