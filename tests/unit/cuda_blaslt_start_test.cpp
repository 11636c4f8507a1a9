// cuBLASLt's start on a background thread (cuda/blaslt_start.h): a device's first tensor starts
// it there (or, with ZC_CUDA_PRESTART=0, compiling or loading a graph with library products),
// prepare_matmul_library waits for it, short-lived processes that exit while it is under way
// exit cleanly, and a process warms the products the previous one ran. Without a GPU,
// preparing says why.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "unit/run_model.h"
#include "unit/test_support.h"
#include "zc/cuda.h"
#include "zc/zc.h"

#if ZC_WITH_CUDA
#include "cuda/blaslt_start.h"
#endif

namespace zc {
namespace {

TEST(CudaBlasLtStart, WithoutAGpuPreparingSaysWhy) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is here";
  std::string why;
  EXPECT_FALSE(cuda::prepare_matmul_library(0, &why));
  EXPECT_EQ(why, cuda::unavailable_reason());
}

#if ZC_WITH_CUDA

// A GPT small enough to check on the CPU, with products large enough for cuBLASLt.
TEST(CudaBlasLtStartGpu, TheFirstTensorOnTheGpuStartsItAndPreparingWaitsForIt) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(22);
  models::GPTConfig cfg{
      .vocab_size = 64, .block_size = 32, .n_layer = 2, .n_head = 2, .d_model = 64};
  auto m = models::gpt(cfg);
  m->eval();
  Tensor tokens = randint(0, 64, {4, 32});
  const Tensor want = (*m)(tokens);
  m->to(Device::cuda(0));
  tokens = tokens.to(Device::cuda(0));
  const char* prestart = std::getenv("ZC_CUDA_PRESTART");
  if (!(prestart && std::string(prestart) == "0")) {
    EXPECT_NE(cuda::blaslt_start_state(0), cuda::BlasLtStart::idle);
  }
  auto fast = compile(m);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(fast(tokens).to(Device::cpu()), want, 1e-3, 1e-4)) << i;
    EXPECT_NE(cuda::blaslt_start_state(0), cuda::BlasLtStart::idle);
  }
  std::string why;
  ASSERT_TRUE(cuda::prepare_matmul_library(0, &why)) << why;
  EXPECT_EQ(cuda::blaslt_start_state(0), cuda::BlasLtStart::ready);
  EXPECT_TRUE(cuda::blaslt_start_error(0).empty());
}

// Short-lived processes that exit right after their first call, while cuBLASLt may still be
// starting on its thread: eight at once, each must exit cleanly; four start it with their
// first tensor, four (ZC_CUDA_PRESTART=0) with their compiled graph.
TEST(CudaBlasLtStartGpu, ProcessesExitingWhileItStartsExitCleanly) {
  ZC_SKIP_WITHOUT_GPU();
  const std::string dir = test::test_dir("blaslt_start");
  const std::string tool = std::string(ZC_TEST_TOOLS_DIR) + "/run_model";
  const test::ProcessRun r = test::run_shell(
      "cd " + dir + " && for i in 1 2 3 4 5 6 7 8; do (ZC_CUDA_PRESTART=$((i % 2)) " + tool +
      " --model gpt --layers 2 --device cuda --check none > out$i 2>&1; echo \"rc $?\" >> out$i) "
      "& done; wait; cat out*");
  ASSERT_EQ(r.rc, 0) << r.out;
  size_t ok = 0;
  for (size_t at = r.out.find("rc 0\n"); at != std::string::npos;
       at = r.out.find("rc 0\n", at + 1)) {
    ++ok;
  }
  EXPECT_EQ(ok, 8u) << r.out;
}

// The products a process ran are recorded in its cache when it exits, and the next process on
// this kind of GPU loads their kernels while it starts (runtime/records/gemm_record.h): the first
// process finds no record, the second warms every product of the first, and with caches off
// nothing is recorded, so nothing is warmed.
TEST(CudaBlasLtStartGpu, TheNextProcessLoadsThePreviousProcessesProducts) {
  ZC_SKIP_WITHOUT_GPU();
  const std::string dir = test::test_dir("blaslt_warm");
  const std::string env = "ZC_LOGS=timing ZC_CACHE_DIR=" + dir;
  const std::string args = "--model gpt --layers 2 --device cuda --check none";
  auto warmed = [](const test::ProcessRun& r) {  // "N of M products", or -1
    const std::string mark = "cuBLASLt warm-up on cuda:0: ";
    const size_t at = r.out.find(mark);
    if (at == std::string::npos) return std::pair<int, int>{-1, -1};
    int n = -1, of = -1;
    std::sscanf(r.out.c_str() + at + mark.size(), "%d of %d", &n, &of);
    return std::pair<int, int>{n, of};
  };
  const test::ProcessRun first = test::run_tool("run_model", env, args);
  ASSERT_EQ(first.rc, 0) << first.out;
  EXPECT_EQ(warmed(first).first, -1) << first.out;
  const test::ProcessRun second = test::run_tool("run_model", env, args);
  ASSERT_EQ(second.rc, 0) << second.out;
  const auto [n, of] = warmed(second);
  EXPECT_GT(n, 0) << second.out;
  EXPECT_EQ(n, of) << second.out;
  const std::string off_env =
      "ZC_FORCE_DISABLE_CACHES=1 ZC_LOGS=timing ZC_CACHE_DIR=" + dir + "/off";
  for (int i = 0; i < 2; ++i) {
    const test::ProcessRun off = test::run_tool("run_model", off_env, args);
    ASSERT_EQ(off.rc, 0) << off.out;
    EXPECT_EQ(warmed(off).first, -1) << off.out;
  }
}

#endif

}  // namespace
}  // namespace zc
