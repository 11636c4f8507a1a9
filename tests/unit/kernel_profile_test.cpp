// ZC_LOGS=kernels: the process-wide table of kernel times (codegen/kernel_table.h), and its CPU
// side (codegen/backends/cpp/kernel_profile.h): every step of a compiled call is timed
// under a label that says what it is, and nothing is printed with the topic off.
#include <gtest/gtest.h>

#include "codegen/kernel_table.h"
#include "run_model.h"
#include "test_support.h"

namespace zc {
namespace {

TEST(KernelTable, LongestTotalFirstWithTotalsByKind) {
  codegen::KernelTable t;
  t.add("matmul [4,8] (f32 NN 4x8x2)", 1.0);
  t.add("row_reduce [4,8] sum", 0.5);
  t.add("matmul [4,8] (f32 NN 4x8x2)", 2.0);
  t.add("attention [1,2,8,4] attention", 2.5);
  const std::string s = t.str("title:");
  EXPECT_EQ(s.rfind("title:\n", 0), 0u) << s;
  const size_t matmul = s.find("matmul [4,8]"), attention = s.find("attention ["),
               row = s.find("row_reduce");
  ASSERT_NE(matmul, std::string::npos) << s;
  EXPECT_LT(matmul, attention) << s;  // 3.0 ms, then 2.5, then 0.5
  EXPECT_LT(attention, row) << s;
  // Launches, the first's time, the others' mean, the share.
  EXPECT_NE(s.find("      2    1000.0    2000.0  50.0%  matmul"), std::string::npos) << s;
  EXPECT_NE(s.find("      1    2500.0    2500.0  41.7%  attention"), std::string::npos) << s;
  EXPECT_NE(s.find("by kind: attention 2.500 ms (41.7%); matmul 3.000 ms (50.0%); row_reduce "
                   "0.500 ms (8.3%); total 6.000 ms"),
            std::string::npos)
      << s;
}

TEST(CpuKernelProfile, EveryStepOfACompiledCallIsTimedUnderItsLabel) {
  const std::string dir = test::test_dir("kernel-profile");
  const std::string env = "ZC_CACHE_DIR=" + dir;
  test::ProcessRun on = test::run_model(env + " ZC_LOGS=kernels", "--model gpt --layers 2");
  ASSERT_EQ(on.rc, 0) << on.out;
  EXPECT_NE(on.out.find("[zc:kernels] kernel times over the process (CPU wall clock"),
            std::string::npos)
      << on.out;
  // Library products say their problem and how they ran; kernels their shape and ops.
  EXPECT_NE(on.out.find("matmul [4,128,768] (f32 NT 512x768x256"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("B weight on default library"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("row_reduce ["), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("attention [4,4,128,64] attention"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("by kind:"), std::string::npos) << on.out;
  test::ProcessRun off = test::run_model(env, "--model gpt --layers 2");
  ASSERT_EQ(off.rc, 0) << off.out;
  EXPECT_EQ(off.out.find("kernel times"), std::string::npos) << off.out;
}

}  // namespace
}  // namespace zc
