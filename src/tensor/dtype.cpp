#include "zc/dtype.h"

#include <cmath>
#include <ostream>

#include "util/check.h"

namespace zc {

void throw_bad_dtype(DType t) {
  detail::check_failed("a known dtype", __FILE__, __LINE__,
                       "bad dtype " + std::to_string(static_cast<int>(t)));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i64:
      return "i64";
    case DType::i32:
      return "i32";
    case DType::boolean:
      return "bool";
    case DType::i8:
      return "i8";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) {
  return os << dtype_name(t);
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
bool is_integral(DType t) {
  return t == DType::i64 || t == DType::i32 || t == DType::i8;
}

namespace {
int category(DType t) {
  return t == DType::boolean ? 0 : is_integral(t) ? 1 : 2;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) return dtype_size(a) > dtype_size(b) ? a : b;  // the wider integer
  // Two different floating types.
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;  // f32 with a 16-bit type, or f16 with bf16
}

// IEEE binary16 conversions with round-to-nearest-even, subnormals, inf and nan.
Half::Half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) {  // inf or nan
    bits = static_cast<uint16_t>(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (mag >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (mag < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Scale so that the half subnormal unit (2^-24) becomes 1 and let the FPU round.
    float a;
    std::memcpy(&a, &mag, 4);
    float scaled = a * 16777216.0f;  // 2^24
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    bits = static_cast<uint16_t>(sign | m);
    return;
  }
  uint32_t exp = ((mag >> 23) - 112) << 10;
  uint32_t mant = (mag >> 13) & 0x3ffu;
  uint32_t rest = mag & 0x1fffu;
  uint32_t h = exp | mant;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  bits = static_cast<uint16_t>(sign | h);
}

Half::operator float() const {
  uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&out, &v, 4);
    out |= sign;
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace zc
