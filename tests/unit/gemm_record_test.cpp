// The record of cuBLASLt products kept for the next process (runtime/records/gemm_record.h): its
// bytes round-trip, anything that is not a record is refused with the reason, and merging puts what
// a process ran first, keeps the rest, ignores plans only warmed and stays bounded. No GPU
// needed: the record is bytes and problems.
#include <gtest/gtest.h>

#if ZC_WITH_CUDA

#include <string>
#include <vector>

#include "runtime/records/gemm_record.h"
#include "test_support.h"
#include "zc/error.h"

namespace zc {
namespace {

using cuda::GemmProblem;
using cuda::GemmUse;

GemmUse use(int64_t m, int64_t n, int64_t k, bool ran = false) {
  GemmProblem p;
  p.M = m, p.N = n, p.K = k, p.lda = k, p.ldb = n, p.ldd = n;
  return GemmUse{p, {}, ran};
}

bool same_list(const std::vector<GemmUse>& x, const std::vector<GemmUse>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i].problem == y[i].problem) || !(x[i].align == y[i].align)) return false;
  }
  return true;
}

std::string refusal(const std::vector<uint8_t>& bytes) {
  return test::error_message([&] { (void)runtime::decode_gemm_record(bytes); });
}

TEST(GemmRecord, RoundTripsEveryField) {
  GemmUse a = use(1024, 768, 3072);
  a.problem.a = a.problem.b = DType::bf16;
  a.problem.d = DType::f32;
  a.problem.trans_a = true, a.problem.lda = 1024;
  a.problem.batch = 3, a.problem.stride_a = 1 << 22, a.problem.stride_b = 0;
  a.problem.stride_d = 1024 * 768;
  a.problem.epilogue = cuda::Epilogue::bias_relu;
  a.problem.allow_tf32 = true;
  a.align = {4, 8, 16, 2};
  GemmUse b = use(17, 1, 300);
  b.problem.a = b.problem.b = b.problem.d = DType::f64;
  b.problem.trans_b = true, b.problem.ldb = 300;
  const std::vector<GemmUse> in{a, b};
  const std::vector<GemmUse> out = runtime::decode_gemm_record(runtime::encode_gemm_record(in));
  EXPECT_TRUE(same_list(in, out));
  EXPECT_TRUE(runtime::decode_gemm_record(runtime::encode_gemm_record({})).empty());
}

TEST(GemmRecord, RefusesWhatIsNotARecordSayingWhy) {
  const std::vector<uint8_t> good = runtime::encode_gemm_record(std::vector<GemmUse>{use(8, 8, 8)});
  // Offsets: version (4), count (8), then a's, b's and d's dtype, M at 15.
  std::vector<uint8_t> bad = good;
  bad[0] = 9;
  EXPECT_NE(refusal(bad).find("version 9"), std::string::npos) << refusal(bad);
  bad = good;
  bad[5] = 1;  // 257 products
  EXPECT_NE(refusal(bad).find("at most"), std::string::npos) << refusal(bad);
  bad = good;
  bad[12] = static_cast<uint8_t>(DType::i64);
  EXPECT_NE(refusal(bad).find("dtype"), std::string::npos) << refusal(bad);
  bad = good;
  bad[15] = 0;  // M of 0
  EXPECT_NE(refusal(bad).find("invalid product"), std::string::npos) << refusal(bad);
  bad = good;
  bad[good.size() - 1] = 3;  // the bias alignment's top byte: not a power of two up to 256
  EXPECT_NE(refusal(bad).find("alignment"), std::string::npos) << refusal(bad);
  bad = good;
  bad.push_back(0);
  EXPECT_NE(refusal(bad).find("trailing"), std::string::npos) << refusal(bad);
  bad = good;
  bad.resize(good.size() - 3);
  EXPECT_FALSE(test::contains(refusal(bad), "no zc::Error"));
  GemmUse overlapping = use(8, 8, 8);
  overlapping.problem.ldd = 4;  // D's rows overlap
  EXPECT_NE(refusal(runtime::encode_gemm_record(std::vector<GemmUse>{overlapping}))
                .find("invalid product"),
            std::string::npos);
}

TEST(GemmRecord, MergingPutsWhatRanFirstAndKeepsTheRest) {
  const std::vector<GemmUse> found{use(1, 1, 1), use(2, 2, 2)};
  // Nothing new: the record stays as it was, order included, whatever was only warmed.
  const std::vector<GemmUse> again{use(2, 2, 2, true), use(1, 1, 1, true), use(9, 9, 9, false)};
  EXPECT_TRUE(same_list(runtime::merge_gemm_record(found, again), found));
  // A product that ran and is new: what ran first, in the order planned, then the rest.
  GemmUse scaled = use(3, 3, 3, true);
  scaled.problem.alpha = 2.0;  // alpha is per call: not part of the record
  const std::vector<GemmUse> planned{scaled, use(2, 2, 2, true), use(8, 8, 8, false)};
  const std::vector<GemmUse> merged = runtime::merge_gemm_record(found, planned);
  EXPECT_TRUE(same_list(merged, {use(3, 3, 3), use(2, 2, 2), use(1, 1, 1)}));
  // Another alignment is another product.
  GemmUse aligned = use(1, 1, 1, true);
  aligned.align.a = 4;
  EXPECT_EQ(runtime::merge_gemm_record(found, std::vector<GemmUse>{aligned}).size(), 3u);
  // Bounded: the oldest of the found record go first.
  std::vector<GemmUse> many, ran;
  for (int64_t i = 1; i <= static_cast<int64_t>(runtime::kMaxRecordedProducts); ++i) {
    many.push_back(use(i, 1, 1));
  }
  ran.push_back(use(1000, 1, 1, true));
  const std::vector<GemmUse> capped = runtime::merge_gemm_record(many, ran);
  ASSERT_EQ(capped.size(), runtime::kMaxRecordedProducts);
  EXPECT_EQ(capped.front().problem.M, 1000);
  EXPECT_EQ(capped.back().problem.M, static_cast<int64_t>(runtime::kMaxRecordedProducts) - 1);
}

}  // namespace
}  // namespace zc

#endif  // ZC_WITH_CUDA
