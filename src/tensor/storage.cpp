#include <atomic>

#include "tensor/device_memory.h"
#include "tensor/host_memory.h"
#include "zc/tensor.h"

namespace zc {

uint64_t Storage::next_uid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (!device.is_cpu()) {
    const DeviceMemoryHooks* hooks = device_memory(device.type);
    if (!hooks) {
      throw Error("cannot allocate on " + device.str() +
                  ": this build of zerocompile has no CUDA backend (it was built without the "
                  "CUDA toolkit headers); rebuild it where the CUDA toolkit is installed, or use "
                  "Device::cpu()");
    }
    data_ = hooks->allocate(nbytes, device.index);
    return;
  }
  data_ = host_memory::allocate(nbytes);
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, Device device) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->owned_ = false;
  return s;
}

std::vector<std::shared_ptr<Storage>> Storage::allocate_together(std::span<const size_t> nbytes,
                                                                 Device device) {
  std::vector<std::shared_ptr<Storage>> out;
  out.reserve(nbytes.size());
  const DeviceMemoryHooks* hooks = device.is_cpu() ? nullptr : device_memory(device.type);
  if (!hooks || nbytes.size() < 2) {
    for (size_t n : nbytes) out.push_back(std::make_shared<Storage>(n, device));
    return out;
  }
  std::vector<void*> blocks(nbytes.size());
  const int64_t group =
      hooks->allocate_group(nbytes.data(), nbytes.size(), blocks.data(), device.index);
  for (size_t i = 0; i < nbytes.size(); ++i) {
    std::shared_ptr<Storage> s(new Storage());
    s->data_ = blocks[i];
    s->nbytes_ = nbytes[i];
    s->device_ = device;
    s->group_ = group;
    out.push_back(std::move(s));
  }
  return out;
}

Storage::~Storage() {
  if (!owned_) return;
  if (device_.is_cpu()) {
    host_memory::release(data_, nbytes_);
  } else if (data_) {
    device_memory(device_.type)->release(data_, device_.index);
  }
}

}  // namespace zc
