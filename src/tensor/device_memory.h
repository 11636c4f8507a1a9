// How tensors reach memory the CPU cannot address. A device's runtime (the CUDA backend)
// registers a table of functions for its Device::Type while libzc is being loaded, before any
// tensor exists; Storage and Tensor::to call through it and so do not depend on that runtime.
// A type nobody registered has no table: this build cannot use that device.
//
// Device pointers travel as void* and are only ever passed back to these functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "zc/device.h"

namespace zc {

struct DeviceMemoryHooks {
  // Raises zc::Error (no usable device, bad index, out of memory); 0 bytes may give nullptr.
  void* (*allocate)(size_t nbytes, int index);
  // Never raises; ignores nullptr.
  void (*release)(void* ptr, int index) noexcept;
  // Both return when the copy is complete.
  void (*copy_from_host)(void* dst, int index, const void* src, size_t nbytes);
  void (*copy_to_host)(void* dst, const void* src, int index, size_t nbytes);
  // Between two devices of the type, or within one.
  void (*copy_between)(void* dst, int dst_index, const void* src, int src_index, size_t nbytes);
  // Sets `nbytes` bytes to zero without a copy from the host; queued in order with the device's
  // later work (which is what reads it), so it may return before the memory is written.
  void (*fill_zero)(void* dst, int index, size_t nbytes);
  // n blocks of nbytes[i] bytes, end to end in one allocation (each freed by `release` on its
  // own), into out[i]; returns an id shared by exactly the blocks of that allocation (> 0).
  int64_t (*allocate_group)(const size_t* nbytes, size_t n, void** out, int index);
};

// `hooks` must live as long as the process.
void register_device_memory(Device::Type type, const DeviceMemoryHooks* hooks);
// nullptr when no runtime registered for `type`.
const DeviceMemoryHooks* device_memory(Device::Type type);

}  // namespace zc
