// The autocast policy ops::call applies (zc/autocast.h): which dtype an op's floating
// operands are cast to under the thread's autocast scope.
#pragma once

#include <optional>
#include <span>

#include "ops/registry.h"

namespace zc::ops {

// The dtype op `id`'s floating inputs take under the thread's autocast scope, or none (no
// scope, an op the policy leaves to type promotion, or inputs already in it).
std::optional<DType> autocast_target(OpId id, std::span<const Tensor> inputs);

}  // namespace zc::ops
