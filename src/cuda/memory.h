// Copies and fills of device memory, all queued on the current stream of the device involved so
// that they run in order with the other work zc queued there (the blocking cuMemcpy functions
// use the legacy default stream, which a non-blocking stream does not wait for).
//
// Copies that involve host memory return when the host buffer may be reused: it may be pageable
// and reused at once, and a device-to-host copy is read by the host right after. A
// host-to-device copy of at most 16 bytes (a scalar) is queued instead, its bytes taken by value,
// so that it does not wait for the work already queued; a larger one waits for the copy. (A
// stream recording a CUDA graph sees no such copy, whose value the graph would keep: recording
// runs only a compiled graph's launches, graph_executable.cpp.)
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace zc::cuda {

void copy_host_to_device(CUdeviceptr dst, const void* src, size_t nbytes, int device);
// Into memory that no queued work uses (fresh from cuMemAlloc, say) through a stream of its own,
// so that it does not wait for the work queued on the device: a graph loading while another
// runs uploads its constants at once. Returns when the bytes are on the device.
void upload_to_unused(CUdeviceptr dst, const void* src, size_t nbytes, int device);
void copy_device_to_host(void* dst, CUdeviceptr src, size_t nbytes, int device);
// Asynchronous: ordered on the current stream of `device`, which holds both buffers.
void copy_device_to_device(CUdeviceptr dst, CUdeviceptr src, size_t nbytes, int device);
// Between two devices (or within one). Waits for the source device's current stream before
// and for the destination's after, so both sides see a finished copy.
void copy_between_devices(CUdeviceptr dst, int dst_device, CUdeviceptr src, int src_device,
                          size_t nbytes);

// Asynchronous fills on the current stream of `device`: `nbytes` bytes of `value`, or `count`
// 32-bit words of `value` (dst 4-byte aligned).
void fill_bytes(CUdeviceptr dst, uint8_t value, size_t nbytes, int device);
void fill_words(CUdeviceptr dst, uint32_t value, size_t count, int device);

}  // namespace zc::cuda
