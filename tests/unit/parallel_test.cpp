// run_indexed (util/parallel.h): every index runs exactly once, and an error is the one a plain
// loop would have met first, whichever thread met it and whenever.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "util/parallel.h"

namespace zc {
namespace {

TEST(RunIndexed, EveryIndexRunsExactlyOnce) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{100}}) {
    std::vector<std::atomic<int>> runs(n);
    run_indexed(n, [&](size_t i) { ++runs[i]; });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i << " of " << n;
  }
}

TEST(RunIndexed, TheLowestFailingIndexIsRethrownAfterAllRan) {
  const size_t n = 32;
  std::vector<std::atomic<int>> runs(n);
  for (int attempt = 0; attempt < 5; ++attempt) {
    for (auto& r : runs) r = 0;
    try {
      run_indexed(n, [&](size_t i) {
        ++runs[i];
        // The later failure is met first in time on any thread that takes it.
        if (i == 9) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (i == 9 || i == 20) throw std::runtime_error("index " + std::to_string(i));
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "index 9");
    }
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i;
  }
}

}  // namespace
}  // namespace zc
