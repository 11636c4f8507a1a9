// What every call of a compiled executable needs around the kernels: dense input pointers,
// fresh output tensors, and a scratch arena of its own (so calls from many threads never
// share one).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "codegen/executable.h"
#include "ops/registry.h"
#include "zc/tensor.h"

namespace zc::codegen {

// Arenas of a fixed size on one device, reused across calls. A lease returns its arena when it
// ends, also when the call throws. Host arenas are kept by the pool; a GPU's come from its
// caching allocator, which keeps them.
class ArenaPool {
 public:
  explicit ArenaPool(int64_t bytes, Device device = Device::cpu())
      : bytes_(bytes), device_(device) {}

  class Lease {
   public:
    Lease(const ArenaPool* pool, char* p, std::shared_ptr<Storage> device_block)
        : pool_(pool), p_(p), block_(std::move(device_block)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (!block_) pool_->give(p_);
    }
    char* get() const { return p_; }

   private:
    const ArenaPool* pool_;
    char* p_;
    std::shared_ptr<Storage> block_;  // a GPU arena
  };

  Lease take() const;
  ~ArenaPool();

 private:
  void give(char* p) const;
  // An arena is never empty: its address is passed to the kernels.
  size_t block_bytes() const { return static_cast<size_t>(std::max<int64_t>(bytes_, 64)); }
  int64_t bytes_;
  Device device_;
  mutable std::mutex mu_;
  mutable std::vector<char*> free_;
};

// The address of t's element 0 on its device (a device address for a GPU tensor).
void* data_address(const Tensor& t);

// Pointers to each input's elements, dense (generated code reads row-major); a strided input
// is copied (on its device) into `keep`, which must outlive the pointers.
// `identities`, when given, receives what holds each pointer's memory (unknown for a copy).
std::vector<void*> dense_inputs(std::span<const Tensor* const> inputs, std::vector<Tensor>& keep,
                                std::vector<InputIdentity>* identities = nullptr);

// New output tensors for `metas` (on the metadata's devices), and their addresses in `ptrs`.
// Host outputs from index `together_from` on are views of one storage, each 64-byte aligned
// (Executable::run_together_from).
std::vector<Tensor> new_outputs(const std::vector<ops::TensorMeta>& metas, std::vector<void*>& ptrs,
                                size_t together_from = SIZE_MAX);

}  // namespace zc::codegen
