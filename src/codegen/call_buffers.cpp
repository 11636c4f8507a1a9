#include "codegen/call_buffers.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "ops/eager.h"

namespace zc::codegen {

ArenaPool::Lease ArenaPool::take() const {
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      char* p = free_.back();
      free_.pop_back();
      return Lease(this, p);
    }
  }
  size_t bytes = static_cast<size_t>(std::max<int64_t>(bytes_, 64));
  char* p = static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  return Lease(this, p);
}

void ArenaPool::give(char* p) const {
  std::lock_guard lock(mu_);
  free_.push_back(p);
}

ArenaPool::~ArenaPool() {
  for (char* p : free_) std::free(p);
}

std::vector<void*> dense_inputs(std::span<const Tensor* const> inputs, std::vector<Tensor>& keep) {
  std::vector<void*> in(inputs.size());
  keep.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    if (t.is_contiguous()) {
      in[i] = t.raw_data();
    } else {
      keep.push_back(ops::eager_contiguous(t));
      in[i] = keep.back().raw_data();
    }
  }
  return in;
}

std::vector<Tensor> new_outputs(const std::vector<ops::TensorMeta>& metas,
                                std::vector<void*>& ptrs) {
  std::vector<Tensor> out;
  ptrs.clear();
  for (const ops::TensorMeta& m : metas) {
    out.push_back(Tensor::empty(m.shape, m.dtype));
    ptrs.push_back(out.back().raw_data());
  }
  return out;
}

}  // namespace zc::codegen
