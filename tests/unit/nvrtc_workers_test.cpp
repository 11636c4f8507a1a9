// NVRTC's helper processes (toolchain/nvrtc_workers.h): the wire, helpers that die or never
// start, many threads on one helper, and NVRTC itself through zc-nvrtc-helper.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "toolchain/nvrtc.h"
#include "toolchain/nvrtc_workers.h"
#include "zc/error.h"

namespace zc::toolchain {
namespace {

const std::string kFake = std::string(ZC_TEST_TOOLS_DIR) + "/fake_nvrtc_helper";

// try_compile, retried while the helpers start (they are not idle until they said ready).
std::optional<NvrtcOutcome> once_ready(NvrtcWorkers& pool, const std::string& source,
                                       const std::string& arch,
                                       const std::vector<std::string>& options) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until && pool.size() > 0) {
    if (auto r = pool.try_compile(source, arch, options)) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

TEST(NvrtcWorkers, AHelperCompilesWhatItIsSentAndAnswersWithItsOutcome) {
  NvrtcWorkers pool;
  ASSERT_EQ(pool.start(2, kFake, "sm_90", {}), 2u);
  EXPECT_EQ(pool.start(2, kFake, "sm_90", {}), 0u);  // once per pool
  std::string big(3 << 20, 'x');                     // larger than a socket's buffer
  big[0] = 'a';
  for (const std::string& source : {std::string("abc"), big, std::string()}) {
    auto r = once_ready(pool, source, "sm_90", {"--std=c++17", "--minimal"});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->stage, NvrtcOutcome::Stage::ok);
    EXPECT_EQ(r->result.log, "sm_90 --std=c++17 --minimal");
    EXPECT_EQ(std::string(r->result.cubin.begin(), r->result.cubin.end()),
              std::string(source.rbegin(), source.rend()));
    EXPECT_EQ(r->result.seconds, 0.25);
  }
  auto failed = once_ready(pool, "fail", "sm_80", {});
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->stage, NvrtcOutcome::Stage::compile);
  EXPECT_EQ(failed->detail, "NVRTC_ERROR_COMPILATION");
  EXPECT_TRUE(failed->result.cubin.empty());
  EXPECT_EQ(pool.size(), 2u);
}

TEST(NvrtcWorkers, AHelperThatDiesIsDroppedAndTheCallerCompilesItself) {
  NvrtcWorkers pool;
  ASSERT_EQ(pool.start(1, kFake, "sm_90", {}), 1u);
  ASSERT_TRUE(once_ready(pool, "abc", "sm_90", {}));
  EXPECT_FALSE(pool.try_compile("die", "sm_90", {}));
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_FALSE(pool.try_compile("abc", "sm_90", {}));  // none left

  NvrtcWorkers killed;
  ASSERT_EQ(killed.start(1, kFake, "sm_90", {}), 1u);
  ASSERT_TRUE(once_ready(killed, "abc", "sm_90", {}));
  ::kill(killed.pids().at(0), SIGKILL);
  EXPECT_FALSE(killed.try_compile("abc", "sm_90", {}));
  EXPECT_EQ(killed.size(), 0u);
}

TEST(NvrtcWorkers, AProgramThatNeverSaysReadyIsNeverGivenWork) {
  NvrtcWorkers pool;
  ASSERT_EQ(pool.start(1, "/bin/true", "sm_90", {}), 1u);  // exits at once
  EXPECT_FALSE(once_ready(pool, "abc", "sm_90", {}));
  EXPECT_EQ(pool.size(), 0u);
  NvrtcWorkers missing;
  EXPECT_EQ(missing.start(1, "/no/such/helper", "sm_90", {}), 0u);
  EXPECT_FALSE(missing.try_compile("abc", "sm_90", {}));
}

TEST(NvrtcWorkers, AForkOfTheProcessLeavesItsHelpersAlone) {
  NvrtcWorkers pool;
  ASSERT_EQ(pool.start(1, kFake, "sm_90", {}), 1u);
  ASSERT_TRUE(once_ready(pool, "abc", "sm_90", {}));
  const pid_t child = ::fork();
  if (child == 0) ::_exit(pool.try_compile("abc", "sm_90", {}) ? 1 : 0);
  int status = -1;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child used the helper";
  auto r = pool.try_compile("def", "sm_90", {});  // the parent's conversation is intact
  ASSERT_TRUE(r);
  EXPECT_EQ(std::string(r->result.cubin.begin(), r->result.cubin.end()), "fed");
}

TEST(NvrtcWorkers, ManyThreadsOnOneHelperAreEachAnsweredOrTurnedAway) {
  NvrtcWorkers pool;
  ASSERT_EQ(pool.start(1, kFake, "sm_90", {}), 1u);
  ASSERT_TRUE(once_ready(pool, "warm", "sm_90", {}));
  std::vector<std::thread> threads;
  std::vector<int> answered(8, -1);  // 1: its own answer, 2: turned away, 0: another's answer
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string source = "source " + std::to_string(t);
      auto r = pool.try_compile(source, "sm_90", {});
      if (!r) {
        answered[t] = 2;
      } else {
        answered[t] = std::string(r->result.cubin.rbegin(), r->result.cubin.rend()) == source;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int a : answered) EXPECT_TRUE(a == 1 || a == 2) << a;
  EXPECT_EQ(pool.size(), 1u);
}

// NVRTC itself: zc-nvrtc-helper (beside libzc in the build tree) gives the cubin this process
// gives, and compile_cubin from many threads at once gives the cubins compiled one by one.
TEST(NvrtcWorkers, TheHelperAndManyThreadsCompileWhatThisProcessCompiles) {
  if (!find_nvrtc()) GTEST_SKIP() << "no NVRTC on this machine";
  const std::string helper = nvrtc_helper_path();
  ASSERT_FALSE(helper.empty()) << "zc-nvrtc-helper is built beside libzc";
  const std::vector<std::string> options{"--std=c++17", "--minimal"};
  auto source = [](int i) {
    return "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= " + std::to_string(i) +
           ".5f; }\n";
  };
  std::vector<std::vector<uint8_t>> alone;
  for (int i = 0; i < 4; ++i) alone.push_back(compile_cubin(source(i), "sm_80", options).cubin);

  NvrtcWorkers pool;
  ASSERT_EQ(pool.start(1, helper, "sm_80", options), 1u);
  auto there = once_ready(pool, source(1), "sm_80", options);
  ASSERT_TRUE(there);
  EXPECT_EQ(there->stage, NvrtcOutcome::Stage::ok);
  EXPECT_EQ(there->result.cubin, alone[1]);
  auto rejected = once_ready(pool, "this is not CUDA", "sm_80", options);
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->stage, NvrtcOutcome::Stage::compile);
  EXPECT_NE(rejected->result.log.find("error"), std::string::npos) << rejected->result.log;

  std::vector<std::vector<uint8_t>> together(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&, i] { together[i] = compile_cubin(source(i), "sm_80", options).cubin; });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(together[i], alone[i]) << i;
  // A rejected program names NVRTC's complaint wherever it was compiled.
  std::vector<std::thread> bad;
  std::vector<std::string> errors(3);
  for (int i = 0; i < 3; ++i) {
    bad.emplace_back([&, i] {
      try {
        compile_cubin("this is not CUDA " + std::to_string(i), "sm_80", options);
      } catch (const Error& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : bad) t.join();
  for (const std::string& e : errors) EXPECT_NE(e.find("NVRTC rejected"), std::string::npos) << e;
}

}  // namespace
}  // namespace zc::toolchain
