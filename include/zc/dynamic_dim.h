// zc::DynamicDim: one dim of a compiled call's input whose size varies (docs/dynamic-shapes.md).
// Named by CompileOptions::dynamic_dims and by a module's own Module::variable_dims().
#pragma once

#include <cstddef>
#include <cstdint>

namespace zc {

// A dim marked dynamic before the first call (torch's mark_dynamic): input `input`'s dim `dim`
// (negative counts from the end), sizes in [min, max]. A size outside the range compiles for
// itself. min below 2 counts as 2. A call without that input or dim raises zc::Error.
struct DynamicDim {
  size_t input = 0;
  int64_t dim = 0;
  int64_t min = 2;
  int64_t max = INT64_MAX;
};

}  // namespace zc
