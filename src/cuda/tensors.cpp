#include "cuda/tensors.h"

#include <cstdint>
#include <vector>

#include "cuda/allocator.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "tensor/device_memory.h"
#include "util/check.h"

namespace zc::cuda {

namespace {

CUdeviceptr address(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

void* allocate_storage(size_t nbytes, int index) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(allocate(nbytes, index)));
}

void release_storage(void* ptr, int) noexcept {
  release(address(ptr));
}

void copy_from_host(void* dst, int index, const void* src, size_t nbytes) {
  copy_host_to_device(address(dst), src, nbytes, index);
}

void copy_to_host(void* dst, const void* src, int index, size_t nbytes) {
  copy_device_to_host(dst, address(src), nbytes, index);
}

void copy_between(void* dst, int dst_index, const void* src, int src_index, size_t nbytes) {
  copy_between_devices(address(dst), dst_index, address(src), src_index, nbytes);
}

void fill_zero(void* dst, int index, size_t nbytes) {
  fill_bytes(address(dst), 0, nbytes, index);
}

int64_t allocate_storage_group(const size_t* nbytes, size_t n, void** out, int index) {
  std::vector<CUdeviceptr> ptrs(n);
  const int64_t group = allocate_group({nbytes, n}, ptrs.data(), index, current_stream(index));
  for (size_t i = 0; i < n; ++i) out[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(ptrs[i]));
  return group + 1;
}

constexpr DeviceMemoryHooks kHooks{allocate_storage,      release_storage, copy_from_host,
                                   copy_to_host,          copy_between,    fill_zero,
                                   allocate_storage_group};

// libzc is a shared library linked from all of its objects, so this runs whenever it is loaded.
[[maybe_unused]] const bool registered =
    (register_device_memory(Device::Type::cuda, &kHooks), true);

}  // namespace

CUdeviceptr device_address(const Tensor& t) {
  if (!t.defined()) throw Error("device_address: the tensor is undefined");
  if (!t.device().is_cuda()) {
    throw Error("device_address: the tensor is on " + t.device().str() +
                ", not on a CUDA device; move it with .to(Device::cuda())");
  }
  TensorImpl& impl = *t.unsafe_impl();
  if (!impl.storage) {
    ZC_CHECK(impl.trace != nullptr, "tensor without storage and without trace");
    impl.trace->force(impl);
    ZC_CHECK(impl.storage != nullptr, "force() left no storage");
  }
  return address(impl.storage->data()) +
         static_cast<CUdeviceptr>(impl.offset) * dtype_size(impl.dtype);
}

}  // namespace zc::cuda
