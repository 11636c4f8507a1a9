// Elementwise ops beyond their eager kernels: the type each one computes in, and its C
// expression for generated code. Both live in the op's registry entry beside its eager functor,
// and the eager kernels pick their compute type through the same function as the code
// generators, so generated code and eager kernels agree on both by construction (and a test
// compiles every elementwise op on every dtype and compares it with the eager kernel).
//
// A C expression is written once for every C-like target (C++ on the CPU, CUDA C++): it sees
// operands already converted to the compute type, and calls only these helpers, which every
// target's prelude defines for float and double: zc_exp, zc_log, zc_sqrt, zc_tanh, zc_erf,
// zc_fabs, zc_pow, zc_floor, zc_ceil, zc_round (halves to even), zc_trunc, zc_sin, zc_cos,
// zc_asin, zc_acos, zc_atan, zc_fmod and zc_remainder; for the integer types zc_ipow, zc_ifmod
// and zc_iremainder (a divisor of 0 gives 0); and, for every compute type, the NaN-propagating
// zc_max and zc_min.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ops/attrs.h"

namespace zc::ops {

struct TensorMeta;

// How an elementwise op picks the type it computes in.
enum class ComputeRule : uint8_t {
  output,             // the output's compute type (unary ops, where)
  promoted,           // the inputs' promoted type (arithmetic binary ops)
  promoted_floating,  // the promoted type made floating (div)
  comparison,         // the promoted type; the result is bool
  cast,               // the output's compute type, converted to without arithmetic
};

// The type an elementwise op with `rule` computes in, for these inputs and output dtype.
// 16-bit floats compute in f32. Bool operands of arithmetic compute as i32 (abs, relu, max of
// bools work on 0 and 1); comparisons compare bools as bools, and cast converts as it is.
DType elementwise_compute_dtype(ComputeRule rule, std::span<const TensorMeta> inputs, DType out);

// What an op's C expression is built from.
struct CExpr {
  std::span<const std::string> in;  // operand expressions, each of type `type`
  DType type;                       // the compute type: f32, f64, i64, i32 or bool
  const Attrs& attrs;

  const std::string& x() const { return in[0]; }
  // A constant of the compute type, e.g. "(float)0.5".
  std::string lit(double v) const;
  // `e` converted to the compute type.
  std::string cast(const std::string& e) const;
  bool floating() const;
};
using CExprFn = std::string (*)(const CExpr&);

// The C name of a compute type ("float", "double", "int64_t", "int32_t", "bool").
std::string c_type_name(DType compute);
// `v` as a C constant of compute type `t`, exact for every value of t (NaN and infinities
// included).
std::string c_literal(double v, DType t);

}  // namespace zc::ops
