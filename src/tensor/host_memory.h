// Memory for CPU tensors.
//
// Small blocks (under kMappedBytes) come from malloc. Large ones are mapped from the kernel
// directly, so that no large tensor ever lives in malloc's heap: glibc gives a heap's freed
// memory back to the kernel lazily, inside whichever later free() finds enough of it at the
// heap's top, and returning a model's freed weights (hundreds of MB, after Module::to moved
// them to a GPU) cost 12-36 ms of system time in the middle of an unrelated call (measured in
// docs/benchmarks.md and docs/adr/0014). A released mapped block is kept in a cache of free
// blocks by size and handed out again for a block of the same size, so that a step that frees
// and allocates the same activations each time does not fault their pages in again (a 2-layer
// GPT training step on the CPU faulted 1 GB per step with a 256 MiB cache that refused blocks
// once full). The cache holds at most kCachedBytes; past it the oldest blocks are unmapped,
// in the release() that went over.
//
// Thread-safe: tensors are freed on any thread.
#pragma once

#include <cstddef>

namespace zc::host_memory {

inline constexpr size_t kMappedBytes = size_t{1} << 17;
inline constexpr size_t kCachedBytes = size_t{1} << 30;

// 64-byte aligned (a cache line, what AVX-512 loads want); nullptr for 0 bytes. Throws
// std::bad_alloc when the system has no memory for it.
void* allocate(size_t nbytes);
// `nbytes` as given to allocate(). Ignores nullptr.
void release(void* ptr, size_t nbytes) noexcept;

struct Stats {
  size_t mapped_bytes = 0;  // mapped blocks in use or cached
  size_t cached_bytes = 0;  // of which free, in the cache
  long long maps = 0;       // blocks mapped from the kernel
  long long reuses = 0;     // blocks handed out from the cache
};
Stats stats();

}  // namespace zc::host_memory
