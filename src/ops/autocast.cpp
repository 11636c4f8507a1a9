#include "ops/autocast.h"

#include <string>

#include "zc/autocast.h"
#include "zc/error.h"

namespace zc {

namespace {
thread_local std::optional<DType> tl_autocast;
}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : previous_(tl_autocast) {
  if (dtype != DType::bf16 && dtype != DType::f16) {
    throw Error("AutocastGuard: autocast computes in bf16 or f16, got " +
                std::string(dtype_name(dtype)));
  }
  tl_autocast = dtype;
}

AutocastGuard::AutocastGuard() : previous_(tl_autocast) {
  tl_autocast.reset();
}

AutocastGuard::~AutocastGuard() {
  tl_autocast = previous_;
}

std::optional<DType> autocast_dtype() {
  return tl_autocast;
}

namespace ops {

namespace {

// Products, convolutions and attention: where low precision pays (tensor cores, AMX) and
// rounding averages out over the sums.
bool low_precision(OpId id) {
  return id == OpId::matmul || id == OpId::linear || id == OpId::conv2d || id == OpId::attention;
}

// Where bf16 or f16 would lose too much: exponentials, normalizations, long sums.
bool full_precision(OpId id) {
  switch (id) {
    case OpId::softmax:
    case OpId::log_softmax:
    case OpId::layer_norm:
    case OpId::sum:
    case OpId::mean:
    case OpId::var:
    case OpId::exp:
    case OpId::log:
    case OpId::pow:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::optional<DType> autocast_target(OpId id, std::span<const Tensor> inputs) {
  if (!tl_autocast) return std::nullopt;
  std::optional<DType> target;
  if (low_precision(id)) {
    target = *tl_autocast;
  } else if (full_precision(id)) {
    target = DType::f32;
  } else {
    return std::nullopt;
  }
  for (const Tensor& t : inputs) {
    const DType d = t.dtype();
    const bool floating = d == DType::f32 || d == DType::bf16 || d == DType::f16;
    if (floating && d != *target) return target;  // (f64 is left as it is, as torch does)
  }
  return std::nullopt;
}

}  // namespace ops
}  // namespace zc
