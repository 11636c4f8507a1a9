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

namespace {

// data_address without a call out of this file: dense_inputs asks it of every input of a call
// (through Tensor's accessors each of seed64's 130 parameters took four calls: its call 14.5 ->
// 13.5-14.0 us here; what is left is waiting for the shapes' memory).
void* first_element(const Tensor& t) {
  const TensorImpl& impl = *t.unsafe_impl();
  // A traced CPU tensor has no storage until raw_data() forces it.
  if (!impl.storage) return t.raw_data();
  return static_cast<char*>(impl.storage->data()) + impl.offset * dtype_size(impl.dtype);
}

}  // namespace

void* data_address(const Tensor& t) {
  return first_element(t);
}

std::vector<void*> dense_inputs(std::span<const Tensor* const> inputs, std::vector<Tensor>& keep,
                                std::vector<InputIdentity>* identities) {
  std::vector<void*> in(inputs.size());
  keep.reserve(inputs.size());
  if (identities) identities->assign(inputs.size(), InputIdentity{});
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    if (t.is_contiguous()) {
      in[i] = first_element(t);
      const Storage* s = t.unsafe_impl()->storage.get();
      if (identities && s && s->owned()) (*identities)[i] = {s->uid(), s->version()};
    } else {
      keep.push_back(ops::eager_contiguous(t));
      in[i] = first_element(keep.back());
    }
  }
  return in;
}

std::vector<Tensor> new_outputs(const std::vector<ops::TensorMeta>& metas, std::vector<void*>& ptrs,
                                size_t together_from) {
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
  // The host outputs from together_from on: their 64-byte aligned offsets in one block.
  std::vector<int64_t> at(metas.size(), -1);
  size_t block_bytes = 0;
  for (size_t i = together_from; i < metas.size(); ++i) {
    if (!metas[i].device.is_cpu()) continue;
    at[i] = static_cast<int64_t>(block_bytes);
    const size_t n = static_cast<size_t>(shape_numel(metas[i].shape)) * dtype_size(metas[i].dtype);
    block_bytes += (n + 63) / 64 * 64;
  }
  std::shared_ptr<Storage> block;
  if (block_bytes > 0) block = std::make_shared<Storage>(block_bytes, Device::cpu());
  for (size_t i = 0; i < metas.size(); ++i) {
    const ops::TensorMeta& m = metas[i];
    if (at[i] >= 0) {
      out.push_back(Tensor::view_of(block, m.shape, contiguous_strides(m.shape),
                                    at[i] / static_cast<int64_t>(dtype_size(m.dtype)), m.dtype));
    } else {
      out.push_back(Tensor::empty(m.shape, m.dtype, m.device));
    }
    ptrs.push_back(data_address(out.back()));
  }
  return out;
}

}  // namespace zc::codegen
