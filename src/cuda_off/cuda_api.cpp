// zc::cuda in a build without the CUDA backend: no device is ever usable, and tensors on CUDA
// are refused by Storage (no memory hooks are registered).
#include "zc/cuda.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {
constexpr const char* kReason =
    "this build of zerocompile has no CUDA backend (it was built without the CUDA toolkit "
    "headers); rebuild it where the CUDA toolkit is installed";
}  // namespace

bool is_available() {
  return false;
}

int device_count() {
  return 0;
}

std::string unavailable_reason() {
  return kReason;
}

int driver_version() {
  return 0;
}

const DeviceProperties& device_properties(int device) {
  throw Error("cuda:" + std::to_string(device) + ": " + kReason);
}

void synchronize() {}

void empty_cache() {}

bool prepare_matmul_library(int, std::string* why) {
  if (why) *why = kReason;
  return false;
}

MemoryStats memory_stats(int) {
  return MemoryStats{};
}

}  // namespace zc::cuda
