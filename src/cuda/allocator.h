// The caching allocator for device memory. cuMemAlloc and cuMemFree are slow and cuMemFree
// waits for the device, so freed blocks are kept and handed out again instead.
//
// Sizes: requests up to 1 MiB are rounded up to a multiple of 512 bytes, larger ones to a
// multiple of 2 MiB. A block remembers the stream it was allocated for; when freed it is cached
// for that stream and device, and serves a later request on the same stream: a small request
// only from a block of exactly its rounded size, a large one from the smallest cached block of
// at least its rounded size and at most twice it (blocks are not split). Because work on one
// stream runs in order, the next user of a block cannot overtake the work of the previous one
// still queued; a block used on another stream than its own must be freed only after that work.
//
// Grouped blocks (allocate_group): the outputs of one call of a compiled graph are laid end to
// end in one segment, so that a flat view over several of them (an optimizer's flat gradients)
// needs no copy, and a call costs one cuMemAlloc instead of one per output. Each block is freed
// on its own; the segment returns to a cache of whole groups when its last block is freed, and
// serves only a later group of the same block sizes on the same stream (so the next call with
// that layout gets the same addresses).
//
// When the driver is out of memory, the device's cache is returned to it and the request tried
// once more; then a zc::Error names the request, what zc holds on the device and what the
// device has free. All of it is thread-safe, and release() keeps working while the process
// exits (the allocator is never destroyed).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>

#include "zc/cuda.h"

namespace zc::cuda {

inline constexpr size_t kSmallRequestMax = size_t{1} << 20;
inline constexpr size_t kSmallRounding = 512;
inline constexpr size_t kLargeRounding = size_t{2} << 20;

// The size of the block a request of `nbytes` gets (before any reuse of a larger one).
size_t rounded_size(size_t nbytes);

// At least `nbytes` of memory on `device`, for work on `stream` (current_stream(device) when
// omitted); 0 for 0 bytes. Makes `device` current on this thread. Raises zc::Error for a bad
// device, no driver, or memory exhausted.
CUdeviceptr allocate(size_t nbytes, int device, CUstream stream);
CUdeviceptr allocate(size_t nbytes, int device);
// Blocks of nbytes[i] bytes each (0 allowed), in one segment, in order, each starting 512-byte
// aligned, for work on `stream`; out[i] receives block i. Each is freed with release(). Returns
// the group's id (>= 0), the same for exactly the blocks of one segment.
int64_t allocate_group(std::span<const size_t> nbytes, CUdeviceptr* out, int device,
                       CUstream stream);
// Returns a block from allocate() or allocate_group() to the cache; 0 is ignored. Never raises and
// never calls the driver.
void release(CUdeviceptr ptr) noexcept;

// The blocks cached for `device` go back to the driver (after waiting for the device).
void empty_cache(int device);

}  // namespace zc::cuda
