// Comparing a compiled value with its eager reference, element by element, under the
// tolerances of CompileOptions::accuracy_check.
//
// An element passes when |compiled - eager| <= atol * scale + rtol * |eager|, where scale is
// max(1, max |eager|) over the value: long sums round in proportion to the magnitudes summed,
// which the largest element stands for. NaN or Inf in the compiled value where eager has a
// finite number fails; where eager itself is not finite the element is not compared.
#pragma once

#include "zc/compile.h"
#include "zc/tensor.h"

namespace zc::runtime {

using compiler::AccuracyOutput;

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// The documented default for values of `dtype`; `bf16_products`: f32 products round their
// operands to bfloat16 (MatmulPrecision::Bf16).
Tolerance default_tolerance(DType dtype, bool bf16_products);

// `check`'s atol and rtol where set (not negative), the default otherwise.
Tolerance tolerance_for(const AccuracyCheck& check, DType dtype, bool bf16_products);

// `compiled` against `eager`, on any devices (both are read on the host). The result's shape
// and dtype are the compiled value's; a shape or dtype unlike eager's fails with `problem`
// saying so.
AccuracyOutput compare_values(const Tensor& compiled, const Tensor& eager, Tolerance tol);

}  // namespace zc::runtime
