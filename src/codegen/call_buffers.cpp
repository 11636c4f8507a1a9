#include "codegen/call_buffers.h"

#include "ops/eager.h"
#include "tensor/host_memory.h"

namespace zc::codegen {

ArenaPool::Lease ArenaPool::take() const {
  if (!device_.is_cpu()) {
    auto block = std::make_shared<Storage>(block_bytes(), device_);
    return Lease(this, static_cast<char*>(block->data()), block);
  }
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      char* p = free_.back();
      free_.pop_back();
      return Lease(this, p, nullptr);
    }
  }
  return Lease(this, static_cast<char*>(host_memory::allocate(block_bytes())), nullptr);
}

void ArenaPool::give(char* p) const {
  std::lock_guard lock(mu_);
  free_.push_back(p);
}

ArenaPool::~ArenaPool() {
  for (char* p : free_) host_memory::release(p, block_bytes());
}

void* data_address(const Tensor& t) {
  if (t.device().is_cpu()) return t.raw_data();
  const TensorImpl& impl = *t.unsafe_impl();
  return static_cast<char*>(impl.storage->data()) + impl.offset * dtype_size(impl.dtype);
}

std::vector<void*> dense_inputs(std::span<const Tensor* const> inputs, std::vector<Tensor>& keep,
                                std::vector<InputIdentity>* identities) {
  std::vector<void*> in(inputs.size());
  keep.reserve(inputs.size());
  if (identities) identities->assign(inputs.size(), InputIdentity{});
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    // The common case without a call out of this loop: a contiguous CPU tensor with storage.
    // Through Tensor's accessors each of seed64's 130 parameters took four calls (its call 14.5
    // -> 13.5-14.0 us here); what is left is waiting for the shapes' memory.
    if (const TensorImpl* impl = t.unsafe_impl();
        impl && impl->storage && impl->device.is_cpu() && t.is_contiguous()) {
      in[i] = static_cast<char*>(impl->storage->data()) + impl->offset * dtype_size(impl->dtype);
      if (identities && impl->storage->owned())
        (*identities)[i] = {impl->storage->uid(), impl->storage->version()};
      continue;
    }
    if (t.is_contiguous()) {
      in[i] = data_address(t);
      const Storage* s = t.impl_ptr() ? t.impl_ptr()->storage.get() : nullptr;
      if (identities && s && s->owned()) (*identities)[i] = {s->uid(), s->version()};
    } else {
      keep.push_back(ops::eager_contiguous(t));
      in[i] = data_address(keep.back());
    }
  }
  return in;
}

std::vector<Tensor> new_outputs(const std::vector<ops::TensorMeta>& metas,
                                std::vector<void*>& ptrs) {
  std::vector<Tensor> out;
  ptrs.clear();
  // A GPU's outputs come in one allocation (Storage::allocate_together): one cuMemAlloc for a
  // call's outputs on a first call, and adjacent blocks that a flat view can span later.
  const bool together = metas.size() > 1 && std::all_of(metas.begin(), metas.end(), [&](auto& m) {
                          return !m.device.is_cpu() && m.device == metas[0].device;
                        });
  if (together) {
    std::vector<size_t> bytes;
    for (const ops::TensorMeta& m : metas) {
      bytes.push_back(static_cast<size_t>(shape_numel(m.shape)) * dtype_size(m.dtype));
    }
    std::vector<std::shared_ptr<Storage>> blocks =
        Storage::allocate_together(bytes, metas[0].device);
    for (size_t i = 0; i < metas.size(); ++i) {
      const ops::TensorMeta& m = metas[i];
      out.push_back(Tensor::view_of(blocks[i], m.shape, contiguous_strides(m.shape), 0, m.dtype));
      ptrs.push_back(data_address(out.back()));
    }
    return out;
  }
  for (const ops::TensorMeta& m : metas) {
    out.push_back(Tensor::empty(m.shape, m.dtype, m.device));
    ptrs.push_back(data_address(out.back()));
  }
  return out;
}

}  // namespace zc::codegen
