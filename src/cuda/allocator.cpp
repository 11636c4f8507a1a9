#include "cuda/allocator.h"

#include <algorithm>
#include <compare>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
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
  MemoryStats stats;
};

struct State {
  std::mutex mu;
  std::unordered_map<CUdeviceptr, Block> live;
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
// the device finishes its work first.
void free_cached(int device, DeviceState& d) {
  if (d.cached.empty()) return;
  const Driver& drv = driver();
  use_device(device);
  check(drv.cuCtxSynchronize(),
        "synchronizing cuda:" + std::to_string(device) + " before returning cached memory");
  CUresult first_error = CUDA_SUCCESS;
  for (const auto& [key, ptr] : d.cached) {
    CUresult r = drv.cuMemFree(ptr);
    if (r != CUDA_SUCCESS && first_error == CUDA_SUCCESS) first_error = r;
    d.stats.device_frees += 1;
    d.stats.reserved_bytes -= key.size;
  }
  d.cached.clear();
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
    s.live.emplace(ptr, Block{block_size, device, stream});
    d.stats.cache_hits += 1;
    count_allocation(d, block_size);
    return ptr;
  }

  const Driver& drv = driver();
  CUdeviceptr ptr = 0;
  Timer timer;
  CUresult r = drv.cuMemAlloc(&ptr, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY && !d.cached.empty()) {
    free_cached(device, d);
    r = drv.cuMemAlloc(&ptr, size);
  }
  if (r != CUDA_SUCCESS) raise_allocation_failure(r, nbytes, device, d);
  ZC_LOG(timing) << "cuMemAlloc of " << size << " bytes on cuda:" << device << ": " << timer.ms()
                 << " ms";
  s.live.emplace(ptr, Block{size, device, stream});
  d.stats.device_mallocs += 1;
  d.stats.reserved_bytes += size;
  d.stats.peak_reserved_bytes = std::max(d.stats.peak_reserved_bytes, d.stats.reserved_bytes);
  count_allocation(d, size);
  return ptr;
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
  d.cached.emplace(CacheKey{stream_key(b.stream), b.size}, ptr);
  d.stats.allocated_bytes -= b.size;
}

void empty_cache(int device) {
  check_device(device);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  free_cached(device, s.devices[device]);
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
