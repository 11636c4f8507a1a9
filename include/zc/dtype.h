// Element types and the promotion rule shared by every op.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string_view>

namespace zc {

// New dtypes go at the end: their numbers are in cache keys, packages and bundles.
enum class DType : uint8_t { f32, f64, f16, bf16, i64, i32, boolean, i8 };
inline constexpr int kNumDTypes = 8;

// IEEE binary16, stored as bits; arithmetic happens in float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);  // NOLINT: implicit like a built-in float type
  operator float() const;
};

// bfloat16 (the top half of a float32), round-to-nearest-even on conversion.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = 0x7fc0;  // quiet NaN
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<uint16_t>(u >> 16);
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

[[noreturn]] void throw_bad_dtype(DType t);
// Bytes per element. Inline: a compiled call computes every input's address with it.
inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::boolean:
    case DType::i8:
      return 1;
  }
  throw_bad_dtype(t);
}
std::string_view dtype_name(DType t);  // "f32", "bool", ...
std::ostream& operator<<(std::ostream& os, DType t);
bool is_floating(DType t);
bool is_integral(DType t);  // i8, i32, i64 (not bool)

// Promotion of two tensor dtypes: bool < integers < floating; within a category the wider
// type wins (i8 < i32 < i64); f16 with bf16 gives f32.
DType promote_types(DType a, DType b);

// The C++ type behind a DType, for data<T>() checks.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::i8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}

}  // namespace zc
