// Tensor::to(Device): copies between the CPU and devices through the device's memory hooks.
// Results are contiguous. No device kernel is needed: a strided source on the CPU is made
// contiguous there before it leaves, and a strided device tensor is brought to the CPU as the
// range of storage its elements span, then made contiguous on the CPU.
#include <algorithm>
#include <cstring>
#include <memory>

#include "tensor/assign.h"
#include "tensor/device_memory.h"
#include "util/check.h"
#include "zc/tensor.h"

namespace zc {

namespace {

const DeviceMemoryHooks& hooks_for(Device device) {
  const DeviceMemoryHooks* hooks = device_memory(device.type);
  // A tensor on the device exists, so its runtime registered.
  ZC_CHECK(hooks != nullptr, "no memory hooks for " << device.str());
  return *hooks;
}

// The device address of element 0, forcing a traced tensor first (a graph break, as reading
// its values on the CPU is).
const void* device_first_element(const Tensor& t) {
  TensorImpl& impl = *t.unsafe_impl();
  if (!impl.storage) {
    ZC_CHECK(impl.trace != nullptr, "tensor without storage and without trace");
    impl.trace->force(impl);
    ZC_CHECK(impl.storage != nullptr, "force() left no storage");
  }
  return static_cast<const char*>(impl.storage->data()) + impl.offset * dtype_size(impl.dtype);
}

Tensor to_host(const Tensor& src) {
  Tensor out = Tensor::empty(src.shape(), src.dtype(), Device::cpu());
  if (src.numel() == 0) return out;
  const char* first = static_cast<const char*>(device_first_element(src));
  const size_t esize = dtype_size(src.dtype());
  const DeviceMemoryHooks& hooks = hooks_for(src.device());
  if (src.is_contiguous()) {
    hooks.copy_to_host(out.raw_data(), first, src.device().index,
                       static_cast<size_t>(src.numel()) * esize);
    return out;
  }
  // The elements span [low, high] relative to element 0 (strides may be zero after expand).
  int64_t low = 0, high = 0;
  for (int64_t d = 0; d < src.dim(); ++d) {
    const int64_t reach = src.stride(d) * (src.size(d) - 1);
    (reach < 0 ? low : high) += reach;
  }
  const int64_t span = high - low + 1;
  ZC_CHECK(src.storage_offset() + low >= 0 &&
               static_cast<size_t>(src.storage_offset() + high + 1) * esize <=
                   src.unsafe_impl()->storage->nbytes(),
           "view of " << shape_str(src.shape()) << " strides " << shape_str(src.strides())
                      << " offset " << src.storage_offset() << " leaves its storage");
  auto host = std::make_shared<Storage>(static_cast<size_t>(span) * esize, Device::cpu());
  hooks.copy_to_host(host->data(), first + low * static_cast<int64_t>(esize), src.device().index,
                     host->nbytes());
  return Tensor::view_of(std::move(host), src.shape(), src.strides(), -low, src.dtype())
      .contiguous();
}

Tensor from_host(const Tensor& src, Device device) {
  // Allocating first raises for an unusable device before any work on the source.
  Tensor out = Tensor::empty(src.shape(), src.dtype(), device);
  if (src.numel() == 0) return out;
  const Tensor c = src.contiguous();
  hooks_for(device).copy_from_host(out.unsafe_impl()->storage->data(), device.index, c.raw_data(),
                                   static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  return out;
}

Tensor between_devices(const Tensor& src, Device device) {
  if (!src.is_contiguous()) return from_host(to_host(src), device);
  Tensor out = Tensor::empty(src.shape(), src.dtype(), device);
  if (src.numel() == 0) return out;
  hooks_for(device).copy_between(out.unsafe_impl()->storage->data(), device.index,
                                 device_first_element(src), src.device().index,
                                 static_cast<size_t>(src.numel()) * dtype_size(src.dtype()));
  return out;
}

}  // namespace

void assign_values(const Tensor& dst, const Tensor& src) {
  if (dst.shape() != src.shape() || dst.dtype() != src.dtype() || dst.device() != src.device()) {
    throw Error("assign: cannot write " + shape_str(src.shape()) + " " +
                std::string(dtype_name(src.dtype())) + " on " + src.device().str() + " into " +
                shape_str(dst.shape()) + " " + std::string(dtype_name(dst.dtype())) + " on " +
                dst.device().str() + "; expected the same shape, dtype and device");
  }
  if (!dst.is_contiguous() || dst.is_traced() || !dst.unsafe_impl()->storage) {
    throw Error("assign: the target " + shape_str(dst.shape()) +
                " must be a contiguous tensor with values (not a view or a traced tensor)");
  }
  if (dst.numel() == 0) return;
  const size_t nbytes = static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype());
  const TensorImpl& d = *dst.unsafe_impl();
  void* to = static_cast<char*>(d.storage->data()) + d.offset * dtype_size(d.dtype);
  const Tensor c = src.contiguous();
  if (dst.device().is_cpu()) {
    if (to != c.raw_data()) std::memmove(to, c.raw_data(), nbytes);
  } else {
    hooks_for(dst.device())
        .copy_between(to, dst.device().index, device_first_element(c), c.device().index, nbytes);
  }
  d.storage->bump_version();
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  try {
    if (device.is_cpu()) return to_host(*this);
    if (this->device().is_cpu()) return from_host(*this, device);
    if (device.type == this->device().type) return between_devices(*this, device);
    return from_host(to_host(*this), device);
  } catch (const Error& e) {
    throw Error("to(" + device.str() + "): " + e.what());
  }
}

}  // namespace zc
