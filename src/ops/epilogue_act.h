// The activations a library product can apply to its result within its own call, after the
// bias and residual of its epilogue: oneDNN's post-ops, the CPU's pass after OpenBLAS, and
// ZcEpilogue in generated code, which carries the value as its number. An op's registry entry
// says whether it is one of them (OpDef::epilogue_act), so backends fuse by asking the
// registry rather than by naming ops.
#pragma once

#include <cstdint>

namespace zc::ops {

// The values are ZcEpilogue::act's, part of the generated code's ABI: they never change.
enum class EpilogueAct : uint8_t { none = 0, relu = 1, gelu_tanh = 2, gelu_erf = 3 };

}  // namespace zc::ops
