// The CPU's thread policy (cpu/threads.h): ZC_NUM_THREADS, each call's share of the pool
// when calls run at once, and the caller's own OpenMP setting kept.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <barrier>
#include <thread>
#include <vector>

#include "cpu/onednn_conv.h"
#include "cpu/threads.h"
#include "unit/run_model.h"
#include "unit/test_support.h"
#include "zc/error.h"

namespace zc {
namespace {

TEST(CpuThreads, NumThreadsIsAPositiveIntegerOrUnset) {
  EXPECT_EQ(cpu::parse_num_threads(nullptr), std::nullopt);
  EXPECT_EQ(cpu::parse_num_threads(""), std::nullopt);
  EXPECT_EQ(cpu::parse_num_threads("8"), 8);
  for (const char* bad : {"0", "-2", "four", "8x", " 8", "99999999999"}) {
    std::string msg = test::error_message([&] { cpu::parse_num_threads(bad); });
    EXPECT_NE(msg.find("ZC_NUM_THREADS=\"" + std::string(bad) + "\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("positive integer"), std::string::npos) << msg;
  }
}

TEST(CpuThreads, ZcEnvSaysHowManyAndWhy) {
  const test::ProcessRun set = test::zc_cli("ZC_NUM_THREADS=3", "env");
  ASSERT_EQ(set.rc, 0) << set.out;
  EXPECT_NE(set.out.find("cpu threads    3 (ZC_NUM_THREADS)"), std::string::npos) << set.out;
  const test::ProcessRun bad = test::zc_cli("ZC_NUM_THREADS=lots", "env");
  ASSERT_EQ(bad.rc, 0) << bad.out;  // env reports what is wrong instead of failing
  EXPECT_NE(bad.out.find("cpu threads    error: ZC_NUM_THREADS=\"lots\""), std::string::npos)
      << bad.out;
  const test::ProcessRun json = test::zc_cli("", "env --json");
  EXPECT_NE(json.out.find("\"cpu_threads\":\""), std::string::npos) << json.out;
}

// ZC_CPU_CONV and the pool's size decide how convolutions run (cpu/onednn_conv.h); zc env says.
TEST(CpuThreads, ZcEnvSaysHowConvolutionsRun) {
  const test::ProcessRun bad = test::zc_cli("ZC_CPU_CONV=bogus", "env");
  ASSERT_EQ(bad.rc, 0) << bad.out;
  EXPECT_NE(bad.out.find("cpu conv       error: ZC_CPU_CONV=bogus: expected auto, direct"),
            std::string::npos)
      << bad.out;
  const test::ProcessRun columns = test::zc_cli("ZC_CPU_CONV=columns", "env");
  EXPECT_NE(columns.out.find("cpu conv       columns and a product"), std::string::npos)
      << columns.out;
  const test::ProcessRun few = test::zc_cli("ZC_NUM_THREADS=2", "env");
  const test::ProcessRun many = test::zc_cli("ZC_NUM_THREADS=16", "env");
  const test::ProcessRun direct = test::zc_cli("ZC_NUM_THREADS=2 ZC_CPU_CONV=direct", "env");
  if (!cpu::onednn_conv_available()) {
    EXPECT_NE(few.out.find("cpu conv       columns and a product (no oneDNN in this build)"),
              std::string::npos)
        << few.out;
    return;
  }
  EXPECT_NE(few.out.find("cpu conv       oneDNN direct, channels-last; Winograd for 3x3"),
            std::string::npos)
      << few.out;
  EXPECT_NE(many.out.find("cpu conv       oneDNN direct, channels-last\n"), std::string::npos)
      << many.out;
  EXPECT_NE(direct.out.find("cpu conv       oneDNN direct, channels-last (ZC_CPU_CONV)"),
            std::string::npos)
      << direct.out;
  const test::ProcessRun json = test::zc_cli("", "env --json");
  EXPECT_NE(json.out.find("\"cpu_conv\":\"oneDNN direct"), std::string::npos) << json.out;
}

TEST(CpuThreads, CallsInFlightDivideThePool) {
  EXPECT_EQ(cpu::team_share(16, 1), 16);
  EXPECT_EQ(cpu::team_share(16, 4), 4);
  EXPECT_EQ(cpu::team_share(16, 3), 5);
  EXPECT_EQ(cpu::team_share(2, 5), 1);
  EXPECT_EQ(cpu::team_share(16, 0), 16);
}

// A library call below kOneThreadWork multiply-adds runs on one thread, any other on the whole
// team; the team comes back after it.
TEST(CpuThreads, SmallCallsRunOnOneThread) {
  constexpr int64_t small = cpu::kOneThreadWork;
  EXPECT_EQ(cpu::work_team(16, 0), 1);
  EXPECT_EQ(cpu::work_team(16, small - 1), 1);
  EXPECT_EQ(cpu::work_team(16, small), 16);
  EXPECT_EQ(cpu::work_team(16, 100 * small), 16);
  EXPECT_EQ(cpu::work_team(0, 100 * small), 1);
  const int before = omp_get_max_threads();
  {
    cpu::WorkTeam one(1);
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
  {
    cpu::WorkTeam all(int64_t{1} << 40);
    EXPECT_EQ(omp_get_max_threads(), before);
  }
}

// Why work_team gives one thread or all: after a team of one, the next whole team runs on the
// pool's same threads; a smaller team in between would end some of them (libgomp), and the
// next whole team would start new ones.
TEST(CpuThreads, TeamsOfOneKeepThePoolsThreads) {
  constexpr int kTeam = 4;
  auto team_ids = [](int n) {
    std::vector<long> ids(static_cast<size_t>(n));  // kernel thread ids: not reused at once
    omp_set_num_threads(n);
#pragma omp parallel
    ids[static_cast<size_t>(omp_get_thread_num())] = syscall(SYS_gettid);
    return ids;
  };
  const int before = omp_get_max_threads();
  const std::vector<long> first = team_ids(kTeam);
  team_ids(1);
  EXPECT_EQ(team_ids(kTeam), first);
  omp_set_num_threads(before);
}

TEST(CpuThreads, ConcurrentCallsEachRunTheirShare) {
  const int pool = cpu::cpu_threads(), callers = 4;
  std::barrier all_in(callers), all_set(callers);
  std::vector<int> teams(callers), nested(callers), after(callers);
  std::vector<std::thread> threads;
  for (int i = 0; i < callers; ++i) {
    threads.emplace_back([&, i] {
      omp_set_num_threads(3);  // the caller's own setting, kept after the call
      {
        cpu::CpuCallShare share;
        all_in.arrive_and_wait();
        teams[i] = share.refresh();
        EXPECT_EQ(omp_get_max_threads(), teams[i]);
        {
          cpu::CpuCallShare part;  // a nested call counts once
          nested[i] = part.refresh();
        }
        all_set.arrive_and_wait();
      }
      after[i] = omp_get_max_threads();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < callers; ++i) {
    EXPECT_EQ(teams[i], cpu::team_share(pool, callers)) << "caller " << i;
    EXPECT_EQ(nested[i], teams[i]) << "caller " << i;
    EXPECT_EQ(after[i], 3) << "caller " << i;
  }
  EXPECT_EQ(cpu::CpuCallShare::calls_in_flight(), 0);
  cpu::CpuCallShare alone;
  EXPECT_EQ(alone.refresh(), pool);
}

}  // namespace
}  // namespace zc
