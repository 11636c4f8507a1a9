#include "tensor/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <iterator>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>

namespace zc::host_memory {
namespace {

size_t page_size() {
  static const size_t page = [] {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

size_t mapped_size(size_t nbytes) {
  return (nbytes + page_size() - 1) / page_size() * page_size();
}

struct Block {
  size_t size;
  void* ptr;
};

struct Cache {
  std::mutex mu;
  // Free blocks in the order they were released (oldest first, evicted first) ...
  std::list<Block> by_age;
  // ... and by size, each size's oldest first, so that a size's most recently released block
  // (likeliest to be in the CPU's caches and TLB) is handed out first.
  std::unordered_map<size_t, std::deque<std::list<Block>::iterator>> by_size;
  Stats stats;
};

Cache& cache() {
  // Never destroyed: tensors held by other static objects are released after main returns.
  static Cache* c = new Cache;
  return *c;
}

// Files a released block in the cache; false when there is no memory to note it with.
bool remember(Cache& c, size_t size, void* ptr) noexcept {
  try {
    std::deque<std::list<Block>::iterator>& same_size = c.by_size[size];
    c.by_age.push_back({size, ptr});
    try {
      same_size.push_back(std::prev(c.by_age.end()));
    } catch (const std::bad_alloc&) {
      c.by_age.pop_back();
      return false;
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  c.stats.cached_bytes += size;
  return true;
}

}  // namespace

void* allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  if (nbytes < kMappedBytes) {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t size = mapped_size(nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.by_size.find(size);
    if (it != c.by_size.end() && !it->second.empty()) {
      auto block = it->second.back();
      it->second.pop_back();
      // No empty queues left behind: a process whose sizes vary would collect them.
      if (it->second.empty()) c.by_size.erase(it);
      void* p = block->ptr;
      c.by_age.erase(block);
      c.stats.cached_bytes -= size;
      ++c.stats.reuses;
      return p;
    }
  }
  // Page-aligned, hence 64-byte aligned.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.mapped_bytes += size;
  ++c.stats.maps;
  return p;
}

void release(void* ptr, size_t nbytes) noexcept {
  if (!ptr) return;
  if (nbytes < kMappedBytes) {
    std::free(ptr);
    return;
  }
  size_t size = mapped_size(nbytes);
  Cache& c = cache();
  std::unique_lock<std::mutex> lock(c.mu);
  if (size <= kCachedBytes && remember(c, size, ptr)) {
    ptr = nullptr;
  } else {
    c.stats.mapped_bytes -= size;
  }
  // Over the cap the oldest blocks go. Unmapped outside the lock: hundreds of MB take ms.
  for (;;) {
    if (ptr) {
      lock.unlock();
      munmap(ptr, size);
      lock.lock();
      ptr = nullptr;
    }
    if (c.stats.cached_bytes <= kCachedBytes) break;
    Block oldest = c.by_age.front();
    auto same_size = c.by_size.find(oldest.size);
    same_size->second.pop_front();
    if (same_size->second.empty()) c.by_size.erase(same_size);
    c.by_age.pop_front();
    c.stats.cached_bytes -= oldest.size;
    c.stats.mapped_bytes -= oldest.size;
    ptr = oldest.ptr;
    size = oldest.size;
  }
}

Stats stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

}  // namespace zc::host_memory
