#include "toolchain/build_priority.h"

#include <atomic>

namespace zc::toolchain {

namespace {
std::atomic<int> g_background{0};
}  // namespace

BackgroundBuildScope::BackgroundBuildScope() {
  g_background.fetch_add(1, std::memory_order_relaxed);
}

BackgroundBuildScope::~BackgroundBuildScope() {
  g_background.fetch_sub(1, std::memory_order_relaxed);
}

int compiler_niceness() {
  return g_background.load(std::memory_order_relaxed) > 0 ? 10 : 0;
}

size_t compile_threads() {
  return g_background.load(std::memory_order_relaxed) > 0 ? 1 : 0;
}

}  // namespace zc::toolchain
