// Keeps CUDA tensors in static variables, so they are freed while the process exits, after
// main returns: the allocator must take them back then without crashing. Prints "ok", or
// "skipped: REASON" without a GPU; exits 0 either way.
#include <cstdio>

#include "zc/zc.h"

namespace {
zc::Tensor g_tensor;  // destroyed last
}  // namespace

int main() {
  if (!zc::cuda::is_available()) {
    std::printf("skipped: %s\n", zc::cuda::unavailable_reason().c_str());
    return 0;
  }
  g_tensor = zc::ones({1000}).to(zc::Device::cuda(0));
  static const zc::Tensor kLocal = zc::ones({1 << 20}).to(zc::Device::cuda(0));
  { const zc::Tensor cached = zc::ones({4096}).to(zc::Device::cuda(0)); }
  std::printf("ok\n");
  return 0;
}
