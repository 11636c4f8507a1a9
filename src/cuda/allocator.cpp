#include "cuda/allocator.h"

#include <algorithm>
#include <compare>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "util/log.h"
#include "util/size_text.h"
#include "util/timer.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {

struct Block {
  size_t size = 0;
  int device = 0;
  CUstream stream = nullptr;
  int64_t group = -1;  // the group segment it is part of (allocate_group), or -1
};

// A segment made by allocate_group: its blocks end to end. A block freed while others of its group
// live is cached like any other block (so a group pinned by one long-lived tensor does not pin
// the rest of its memory); when none of its blocks lives any more, they leave that cache and the
// group is kept whole, for a later request with the same block sizes on the same stream (so that
// every call with one layout gets adjacent blocks at the same addresses).
struct Group {
  CUdeviceptr base = 0;
  size_t bytes = 0;
  uintptr_t stream = 0;
  std::vector<size_t> sizes;  // rounded block sizes, in address order
  size_t live = 0;            // blocks handed out and not yet released
};

// Cached blocks ordered by stream, then size: the first entry not below {stream, size} is the
// best fit on that stream.
struct CacheKey {
  uintptr_t stream = 0;
  size_t size = 0;
  auto operator<=>(const CacheKey&) const = default;
};

uintptr_t stream_key(CUstream s) {
  return reinterpret_cast<uintptr_t>(s);
}

struct DeviceState {
  std::multimap<CacheKey, CUdeviceptr> cached;
  // Whole free groups by stream and block sizes; their ids index State::groups.
  std::multimap<std::pair<uintptr_t, std::vector<size_t>>, int64_t> free_groups;
  MemoryStats stats;
};

struct State {
  std::mutex mu;
  std::unordered_map<CUdeviceptr, Block> live;
  std::unordered_map<int64_t, Group> groups;
  std::unordered_map<CUdeviceptr, int64_t> group_of;  // every block of every group
  int64_t next_group = 0;
  std::vector<DeviceState> devices = std::vector<DeviceState>(device_count());
};

// Never destroyed: tensors freed during static destruction still return their blocks here.
State& state() {
  static State* const s = new State();
  return *s;
}

void count_allocation(DeviceState& d, size_t size) {
  d.stats.allocations += 1;
  d.stats.allocated_bytes += size;
  d.stats.peak_allocated_bytes = std::max(d.stats.peak_allocated_bytes, d.stats.allocated_bytes);
}

// Called with the lock held. cuMemFree of memory that queued work may still use is unsafe, so
// the device finishes its work first. Groups with a block still in use stay.
void free_cached(State& s, int device, DeviceState& d) {
  if (d.cached.empty() && d.free_groups.empty()) return;
  const Driver& drv = driver();
  use_device(device);
  check(drv.cuCtxSynchronize(),
        "synchronizing cuda:" + std::to_string(device) + " before returning cached memory");
  CUresult first_error = CUDA_SUCCESS;
  auto free_one = [&](CUdeviceptr ptr, size_t bytes) {
    CUresult r = drv.cuMemFree(ptr);
    if (r != CUDA_SUCCESS && first_error == CUDA_SUCCESS) first_error = r;
    d.stats.device_frees += 1;
    d.stats.reserved_bytes -= bytes;
  };
  // Blocks of a group still in use are freed with their group, later.
  for (auto it = d.cached.begin(); it != d.cached.end();) {
    if (s.group_of.count(it->second)) {
      ++it;
      continue;
    }
    free_one(it->second, it->first.size);
    it = d.cached.erase(it);
  }
  for (const auto& [key, id] : d.free_groups) {
    const Group& g = s.groups.at(id);
    free_one(g.base, g.bytes);
    CUdeviceptr at = g.base;
    for (size_t size : g.sizes) s.group_of.erase(std::exchange(at, at + size));
    s.groups.erase(id);
  }
  d.free_groups.clear();
  check(first_error, "cuMemFree on cuda:" + std::to_string(device));
}

[[noreturn]] void raise_allocation_failure(CUresult r, size_t nbytes, int device,
                                           const DeviceState& d) {
  const std::string where = "cuda:" + std::to_string(device);
  std::string device_memory = "unknown";
  size_t free_bytes = 0, total_bytes = 0;
  if (driver().cuMemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS) {
    device_memory = binary_size(free_bytes) + " free of " + binary_size(total_bytes) + " total";
  }
  const uint64_t cached = d.stats.reserved_bytes - d.stats.allocated_bytes;
  throw Error(where + ": " + (r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory: " : "") +
              "cannot allocate " + std::to_string(nbytes) + " bytes (" + binary_size(nbytes) +
              "): " + error_text(r) + ". zc holds " + binary_size(d.stats.allocated_bytes) +
              " in tensors and " + binary_size(cached) + " cached on " + where +
              "; the device has " + device_memory +
              " memory. Free tensors that are no longer needed or use smaller ones; other "
              "processes on the GPU (nvidia-smi lists them) take memory too");
}

// A new segment from the driver (the cache returned to it first if the device is full).
// Called with the lock held.
CUdeviceptr device_alloc(State& s, DeviceState& d, int device, size_t size, size_t requested) {
  const Driver& drv = driver();
  CUdeviceptr ptr = 0;
  Timer timer;
  CUresult r = drv.cuMemAlloc(&ptr, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY && (!d.cached.empty() || !d.free_groups.empty())) {
    free_cached(s, device, d);
    r = drv.cuMemAlloc(&ptr, size);
  }
  if (r != CUDA_SUCCESS) raise_allocation_failure(r, requested, device, d);
  ZC_LOG(timing) << "cuMemAlloc of " << size << " bytes on cuda:" << device << ": " << timer.ms()
                 << " ms";
  d.stats.device_mallocs += 1;
  d.stats.reserved_bytes += size;
  d.stats.peak_reserved_bytes = std::max(d.stats.peak_reserved_bytes, d.stats.reserved_bytes);
  return ptr;
}

}  // namespace

size_t rounded_size(size_t nbytes) {
  const size_t unit = nbytes <= kSmallRequestMax ? kSmallRounding : kLargeRounding;
  return (nbytes + unit - 1) / unit * unit;
}

CUdeviceptr allocate(size_t nbytes, int device, CUstream stream) {
  check_device(device);
  if (nbytes == 0) return 0;
  use_device(device);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  DeviceState& d = s.devices[device];
  // Beyond this, rounding would overflow; no device has that much memory anyway.
  if (nbytes > SIZE_MAX / 4) raise_allocation_failure(CUDA_ERROR_OUT_OF_MEMORY, nbytes, device, d);
  const size_t size = rounded_size(nbytes);
  const size_t largest_fit = size <= kSmallRequestMax ? size : 2 * size;
  auto it = d.cached.lower_bound(CacheKey{stream_key(stream), size});
  if (it != d.cached.end() && it->first.stream == stream_key(stream) &&
      it->first.size <= largest_fit) {
    const CUdeviceptr ptr = it->second;
    const size_t block_size = it->first.size;
    d.cached.erase(it);
    int64_t group = -1;
    if (auto g = s.group_of.find(ptr); g != s.group_of.end()) {
      group = g->second;
      s.groups.at(group).live += 1;
    }
    s.live.emplace(ptr, Block{block_size, device, stream, group});
    d.stats.cache_hits += 1;
    count_allocation(d, block_size);
    return ptr;
  }

  const CUdeviceptr ptr = device_alloc(s, d, device, size, nbytes);
  s.live.emplace(ptr, Block{size, device, stream});
  count_allocation(d, size);
  return ptr;
}

int64_t allocate_group(std::span<const size_t> nbytes, CUdeviceptr* out, int device,
                       CUstream stream) {
  check_device(device);
  if (nbytes.empty()) return -1;
  use_device(device);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  DeviceState& d = s.devices[device];
  std::vector<size_t> sizes;
  size_t total = 0;
  for (size_t n : nbytes) {
    if (n > SIZE_MAX / 4 || total > SIZE_MAX / 4) {
      raise_allocation_failure(CUDA_ERROR_OUT_OF_MEMORY, n, device, d);
    }
    // Every block starts kSmallRounding-aligned, as a block of its own would.
    sizes.push_back((std::max<size_t>(n, 1) + kSmallRounding - 1) / kSmallRounding *
                    kSmallRounding);
    total += sizes.back();
  }
  int64_t id = -1;
  auto key = std::make_pair(stream_key(stream), sizes);
  if (auto it = d.free_groups.find(key); it != d.free_groups.end()) {
    id = it->second;
    d.free_groups.erase(it);
    d.stats.cache_hits += 1;
  } else {
    id = s.next_group++;
    const size_t bytes = rounded_size(total);
    s.groups.emplace(id, Group{device_alloc(s, d, device, bytes, total), bytes, key.first, sizes});
    CUdeviceptr at = s.groups.at(id).base;
    for (size_t size : sizes) s.group_of.emplace(std::exchange(at, at + size), id);
  }
  Group& g = s.groups.at(id);
  CUdeviceptr at = g.base;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i] = at;
    s.live.emplace(at, Block{sizes[i], device, stream, id});
    count_allocation(d, sizes[i]);
    at += sizes[i];
  }
  g.live = sizes.size();
  return id;
}

CUdeviceptr allocate(size_t nbytes, int device) {
  check_device(device);
  return allocate(nbytes, device, nbytes == 0 ? nullptr : current_stream(device));
}

void release(CUdeviceptr ptr) noexcept {
  if (ptr == 0) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.live.find(ptr);
  if (it == s.live.end()) {
    // A bug in zc; raising from here (a destructor) would end the process.
    std::fprintf(stderr,
                 "zc internal error: device memory at 0x%llx was freed but is not a live "
                 "allocation; ignored (please report this)\n",
                 static_cast<unsigned long long>(ptr));
    return;
  }
  const Block b = it->second;
  s.live.erase(it);
  DeviceState& d = s.devices[b.device];
  d.stats.allocated_bytes -= b.size;
  if (b.group < 0) {
    d.cached.emplace(CacheKey{stream_key(b.stream), b.size}, ptr);
    return;
  }
  auto g_it = s.groups.find(b.group);
  if (g_it == s.groups.end()) return;  // cannot happen: a group outlives its blocks
  Group& g = g_it->second;
  if (--g.live > 0) {
    d.cached.emplace(CacheKey{stream_key(b.stream), b.size}, ptr);
    return;
  }
  // Whole again: its other blocks leave the single-block cache and the group waits for its
  // layout.
  CUdeviceptr at = g.base;
  for (size_t size : g.sizes) {
    if (at == ptr) {
      at += size;
      continue;
    }
    auto [lo, hi] = d.cached.equal_range(CacheKey{g.stream, size});
    for (auto c = lo; c != hi; ++c) {
      if (c->second == at) {
        d.cached.erase(c);
        break;
      }
    }
    at += size;
  }
  d.free_groups.emplace(std::make_pair(g.stream, g.sizes), b.group);
}

void empty_cache(int device) {
  check_device(device);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  free_cached(s, device, s.devices[device]);
}

void empty_cache() {
  if (!is_available()) return;
  for (int device = 0; device < device_count(); ++device) empty_cache(device);
}

MemoryStats memory_stats(int device) {
  if (!is_available()) return MemoryStats{};
  check_device(device);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.devices[device].stats;
}

}  // namespace zc::cuda
