// What every call of a compiled executable needs around the kernels: dense input pointers,
// fresh output tensors, and a scratch arena of its own (so calls from many threads never
// share one).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "ops/registry.h"
#include "zc/tensor.h"

namespace zc::codegen {

// Arenas of a fixed size, reused across calls. A lease returns its arena when it ends, also
// when the call throws.
class ArenaPool {
 public:
  explicit ArenaPool(int64_t bytes) : bytes_(bytes) {}

  class Lease {
   public:
    Lease(const ArenaPool* pool, char* p) : pool_(pool), p_(p) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_->give(p_); }
    char* get() const { return p_; }

   private:
    const ArenaPool* pool_;
    char* p_;
  };

  Lease take() const;
  ~ArenaPool();

 private:
  void give(char* p) const;
  int64_t bytes_;
  mutable std::mutex mu_;
  mutable std::vector<char*> free_;
};

// Pointers to each input's elements, dense (generated code reads row-major); a strided input
// is copied into `keep`, which must outlive the pointers.
std::vector<void*> dense_inputs(std::span<const Tensor* const> inputs, std::vector<Tensor>& keep);

// New output tensors for `metas`, and their data pointers in `ptrs`.
std::vector<Tensor> new_outputs(const std::vector<ops::TensorMeta>& metas,
                                std::vector<void*>& ptrs);

}  // namespace zc::codegen
