// Per-element access by runtime dtype, and the switch that turns a runtime dtype into a C++
// type for templated kernels.
#pragma once

#include <cstdint>

#include "util/check.h"
#include "zc/dtype.h"

namespace zc {

// Calls fn(T{}) with T the C++ type of `dtype`.
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      return fn(float{});
    case DType::f64:
      return fn(double{});
    case DType::f16:
      return fn(Half{});
    case DType::bf16:
      return fn(BFloat16{});
    case DType::i64:
      return fn(int64_t{});
    case DType::i32:
      return fn(int32_t{});
    case DType::boolean:
      return fn(bool{});
    case DType::i8:
      return fn(int8_t{});
  }
  ZC_CHECK(false, "bad dtype");
  return fn(float{});
}

// Conversion between element types through their natural intermediate (float for 16-bit
// floats), with C++ semantics otherwise (float to int truncates; nonzero to bool is true).
template <class To, class From>
inline To convert_element(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert_element<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From{};
  } else {
    return static_cast<To>(v);
  }
}

inline double load_as_double(const void* p, DType dtype) {
  return visit_dtype(dtype, [&](auto tag) -> double {
    using T = decltype(tag);
    return convert_element<double>(*static_cast<const T*>(p));
  });
}

inline void store_from_double(void* p, DType dtype, double v) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    *static_cast<T*>(p) = convert_element<T>(v);
  });
}

}  // namespace zc
