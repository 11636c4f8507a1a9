#include "codegen/backends/cuda/device_errors.h"

#include <mutex>
#include <vector>

#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/memory.h"
#include "zc/error.h"

namespace zc::codegen::cuda {

namespace {
// Error codes kernels store (only one kind so far).
constexpr int kIndexOutOfRange = 1;
}  // namespace

CUdeviceptr device_error_flag(int device) {
  static std::mutex mu;
  static std::vector<CUdeviceptr> flags;
  std::lock_guard lock(mu);
  if (flags.size() <= static_cast<size_t>(device)) flags.resize(device + 1, 0);
  if (!flags[device]) {
    zc::cuda::use_device(device);
    // Not from the caching allocator: the word lives as long as the process and is baked into
    // recorded graphs.
    CUdeviceptr p = 0;
    zc::cuda::check(zc::cuda::driver().cuMemAlloc(&p, 64), "allocating the device error flag");
    zc::cuda::fill_words(p, 0, 1, device);  // on the current stream, ahead of any kernel
    flags[device] = p;
  }
  return flags[device];
}

void raise_device_errors(int device) {
  CUdeviceptr flag = device_error_flag(device);
  int value = 0;
  zc::cuda::copy_device_to_host(&value, flag, sizeof value, device);
  if (value == 0) return;
  zc::cuda::fill_words(flag, 0, 1, device);
  if (value == kIndexOutOfRange) {
    throw Error("embedding: an index is out of range for its table (compiled graph on cuda:" +
                std::to_string(device) +
                "); check the token ids against the embedding's num_embeddings");
  }
  throw Error("a compiled graph's kernel on cuda:" + std::to_string(device) + " failed with code " +
              std::to_string(value));
}

}  // namespace zc::codegen::cuda
