// Guards: when a compiled graph may be reused. A graph is valid for the input metadata it was
// traced with (dtype, shape, device, contiguity, and whether it is a wrapped number, which
// promotes differently) and for the module's structure (parameter and
// buffer metadata and identity, submodule tree, train/eval). The per-call check hashes the
// input metadata and compares it exactly; the module part is re-checked only when the module
// epoch moved.
#pragma once

#include <cstdint>

#include "zc/nn.h"
#include "zc/tensor.h"

namespace zc::capture {

struct InputGuard {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  bool contiguous = true;
  bool wrapped_number = false;
  uint64_t hash = 0;
};

// Cheap: no allocation.
uint64_t input_guard_hash(const Tensor& x);
InputGuard input_guard(const Tensor& x);
bool guard_matches(const InputGuard& g, uint64_t hash, const Tensor& x);

// A hash of everything about a module tree that a trace depends on besides its inputs.
uint64_t module_fingerprint(const nn::Module& m);

}  // namespace zc::capture
