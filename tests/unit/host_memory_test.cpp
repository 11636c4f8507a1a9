// The host allocator under CPU tensors (src/tensor/host_memory.h): alignment, large blocks
// handed out again after release, the cache's cap and its eviction order, many threads. Each
// test is its own process (gtest_discover_tests), so the allocator's counters start from this
// test's own allocations; the sizes are odd ones no other code in the test allocates.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tensor/host_memory.h"
#include "zc/factories.h"
#include "zc/tensor.h"

namespace {

namespace hm = zc::host_memory;

bool aligned64(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 64 == 0;
}

TEST(HostMemory, BlocksOfEverySizeAreAlignedAndWritable) {
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{4097}, hm::kMappedBytes - 1,
                   hm::kMappedBytes, hm::kMappedBytes + 1, size_t{5} << 20}) {
    void* p = hm::allocate(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(aligned64(p)) << n;
    std::memset(p, 0xab, n);
    EXPECT_EQ(static_cast<unsigned char*>(p)[n - 1], 0xab) << n;
    hm::release(p, n);
  }
  EXPECT_EQ(hm::allocate(0), nullptr);
  hm::release(nullptr, 0);
}

TEST(HostMemory, AReleasedLargeBlockIsHandedOutAgainForTheSameSize) {
  const size_t n = (size_t{3} << 20) + 12345;
  hm::Stats before = hm::stats();
  void* a = hm::allocate(n);
  std::memset(a, 1, n);
  hm::release(a, n);
  EXPECT_GE(hm::stats().cached_bytes, before.cached_bytes + n);
  // Same size, rounded to pages: the cached block, without a new mapping.
  void* b = hm::allocate(n + 1);
  EXPECT_EQ(b, a);
  hm::Stats after = hm::stats();
  EXPECT_EQ(after.maps, before.maps + 1);
  EXPECT_EQ(after.reuses, before.reuses + 1);
  // Another size maps a block of its own.
  void* c = hm::allocate(n * 2);
  EXPECT_NE(c, a);
  EXPECT_EQ(hm::stats().maps, before.maps + 2);
  hm::release(b, n);
  hm::release(c, n * 2);
}

TEST(HostMemory, TheCacheKeepsTheNewestBlocksUpToItsCap) {
  // Untouched mappings: virtual address space only, no memory.
  const size_t n = (hm::kCachedBytes / 3 / 4096 + 1) * 4096;  // three go over the cap
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(hm::allocate(n));
  hm::Stats before = hm::stats();
  for (void* p : blocks) hm::release(p, n);
  hm::Stats after = hm::stats();
  EXPECT_LE(after.cached_bytes, hm::kCachedBytes);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes + 2 * n);
  EXPECT_EQ(after.mapped_bytes, before.mapped_bytes - 2 * n);
  // The two released last are the two kept, the newest handed out first.
  EXPECT_EQ(hm::allocate(n), blocks[3]);
  EXPECT_EQ(hm::allocate(n), blocks[2]);
  EXPECT_EQ(hm::stats().maps, after.maps);
  hm::release(blocks[2], n);
  hm::release(blocks[3], n);
}

TEST(HostMemory, ABlockLargerThanTheCacheIsUnmappedAtOnce) {
  const size_t n = hm::kCachedBytes + 4096;
  void* p = hm::allocate(n);
  hm::Stats before = hm::stats();
  hm::release(p, n);
  hm::Stats after = hm::stats();
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
  EXPECT_EQ(after.mapped_bytes, before.mapped_bytes - n);
}

TEST(HostMemory, ManyThreadsAllocateAndReleaseTogether) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        size_t n = hm::kMappedBytes + static_cast<size_t>((t * 7 + i) % 5) * 4096;
        auto* p = static_cast<unsigned char*>(hm::allocate(n));
        p[0] = static_cast<unsigned char>(t);
        p[n - 1] = static_cast<unsigned char>(i);
        EXPECT_EQ(p[0], static_cast<unsigned char>(t));
        hm::release(p, n);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  hm::Stats s = hm::stats();
  EXPECT_EQ(s.mapped_bytes, s.cached_bytes);  // nothing is in use any more
  EXPECT_EQ(s.maps + s.reuses, 8 * 200);
}

TEST(HostMemory, ATensorFreedAndMadeAgainReusesItsMemory) {
  const zc::Shape shape{3, 1000, 1001};  // 12 MB of f32
  const void* first = nullptr;
  {
    zc::Tensor t = zc::ones(shape);
    first = t.raw_data();
  }
  zc::Tensor again = zc::zeros(shape);
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_EQ(again.data<float>()[3 * 1000 * 1001 - 1], 0.0f);
}

}  // namespace
