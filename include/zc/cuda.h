// zc::cuda: whether a GPU is usable and what it is. Every function here works in every build and
// on every machine: without a GPU (or in a build without the CUDA backend) none raises but
// device_properties(), is_available() is false and device_count() is 0; unavailable_reason()
// says why.
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

}  // namespace zc::cuda
