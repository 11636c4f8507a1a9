#include "tensor/device_memory.h"

#include <cstdint>
#include <iterator>

#include "util/check.h"

namespace zc {

namespace {

// Constant-initialized, so it is ready before any registration during dynamic initialization,
// whatever the order of initializers across files.
constinit const DeviceMemoryHooks* g_hooks[2] = {};

size_t slot(Device::Type type) {
  const auto i = static_cast<size_t>(type);
  ZC_CHECK(i < std::size(g_hooks), "device type " << i << " has no hook slot");
  return i;
}

}  // namespace

void register_device_memory(Device::Type type, const DeviceMemoryHooks* hooks) {
  g_hooks[slot(type)] = hooks;
}

const DeviceMemoryHooks* device_memory(Device::Type type) {
  return g_hooks[slot(type)];
}

}  // namespace zc
