// zc::cuda: whether a GPU is usable, what it is, and the memory zc holds on it. Every function
// here works in every build and on every machine: without a GPU (or in a build without the CUDA
// backend) none raises but device_properties(), is_available() is false, device_count() is 0
// and the statistics are zero; unavailable_reason() says why.
#pragma once

#include <cstdint>
#include <string>

namespace zc::cuda {

bool is_available();
int device_count();
// Empty when a GPU is usable; otherwise why not and what to do about it.
std::string unavailable_reason();
// The CUDA version the installed driver supports (13000 for 13.0); 0 without a driver.
int driver_version();

struct DeviceProperties {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int major = 0;     // compute capability major.minor
  int minor = 0;
  int multiprocessor_count = 0;
  uint64_t total_memory = 0;  // bytes
  int l2_cache_bytes = 0;
  int max_shared_memory_per_block_optin = 0;  // bytes a kernel may opt in to
  int warp_size = 0;
};
// Raises zc::Error for an index that is not a device of this machine.
const DeviceProperties& device_properties(int device);

// Waits for all work zc queued on every device it has used; raises zc::Error for an error a
// kernel or copy reported.
void synchronize();
// Returns the device memory zc keeps cached for reuse to the driver (for other processes, or
// before measuring free memory). Tensors alive keep theirs.
void empty_cache();

// Matrix products on a GPU run through cuBLASLt, whose start costs a process 100-200 ms
// (opening the library and its own initialization). Compiling or loading a graph that needs it
// starts it on a background thread, and the graph's first product waits for what is left of it.
// This starts it on `device` and waits until it is ready: a server can call it at start-up, off
// the path of its first request. False, with the reason in `why`, when cuBLASLt cannot be used
// here.
bool prepare_matmul_library(int device = 0, std::string* why = nullptr);

// The caching allocator's figures for one device; sizes in bytes, counts since the process
// started.
struct MemoryStats {
  uint64_t allocated_bytes = 0;  // held by live tensors (sizes after rounding)
  uint64_t peak_allocated_bytes = 0;
  uint64_t reserved_bytes = 0;  // obtained from the driver: allocated plus cached for reuse
  uint64_t peak_reserved_bytes = 0;
  uint64_t allocations = 0;     // requests served
  uint64_t cache_hits = 0;      // requests served from the cache
  uint64_t device_mallocs = 0;  // cuMemAlloc calls that succeeded
  uint64_t device_frees = 0;    // cuMemFree calls (cache emptied)
};
// Zero for a device zc has not allocated on, and everywhere without a GPU; raises zc::Error for
// an index that is not a device of this machine when there are devices.
MemoryStats memory_stats(int device = 0);

}  // namespace zc::cuda
