// What the layers' constructors share: argument checks and torch's initializations.
#pragma once

#include <cstdint>
#include <string>

#include "zc/error.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::nn {

// Raises zc::Error naming the module and the argument unless `value` is positive.
inline void check_positive(const char* module, const char* what, int64_t value) {
  if (value <= 0) {
    throw Error(std::string(module) + ": " + what + " must be positive, got " +
                std::to_string(value));
  }
}

// Uniform in [-bound, bound), the distribution torch.nn.Linear and Conv2d draw their weights and
// bias from (kaiming_uniform(a=sqrt(5)) reduces to bound 1/sqrt(fan_in)).
inline Tensor uniform(const Shape& shape, double bound) {
  return (rand(shape) * 2.0 - 1.0) * bound;
}

}  // namespace zc::nn
