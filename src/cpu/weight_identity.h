// What holds a weight's memory in one call, for reusing what a kernel derived from it (a
// convolution's weights in oneDNN's blocked layout, a product's B packed for oneDNN's matmul)
// across calls. Generated code's executables get it from codegen::InputIdentity.
#pragma once

#include <cstdint>

namespace zc::cpu {

// An owned storage's uid and version (Storage::uid, Storage::version); storage 0 when unknown,
// and then nothing derived from the memory is kept. Writes through Tensor::data<T>() do not
// bump the version (as in torch), so a weight changed that way must be assigned anew
// (assign_values, copy_) for kept copies to follow it.
struct WeightIdentity {
  uint64_t storage = 0;
  uint64_t version = 0;
  bool known() const { return storage != 0; }
  bool operator==(const WeightIdentity&) const = default;
};

}  // namespace zc::cpu
