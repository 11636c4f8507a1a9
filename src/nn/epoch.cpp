#include "nn/epoch.h"

#include <atomic>

namespace zc::nn {

namespace {
std::atomic<uint64_t> g_epoch{1};
}  // namespace

uint64_t module_epoch() {
  return g_epoch.load(std::memory_order_acquire);
}
void bump_module_epoch() {
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace zc::nn
