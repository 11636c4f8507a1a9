// The helpers that generated code of every C-like backend shares, written once: integer powers
// with wrap-around, and max/min that propagate NaN, as the eager kernels compute them
// (ops/elementwise.h names them). A backend's prelude defines ZC_FN, its qualifiers for a
// helper function (`static inline`, or `static __device__ __forceinline__` on CUDA), and the
// emitter writes this text right after it.
#pragma once

namespace zc::codegen {

inline constexpr const char* kSharedHelpers =
    R"HELPERS(// Integer powers, exact with wrap-around, as the eager kernel computes them.
template <class T> ZC_FN T zc_ipow(T a, T b) {
  if (b < 0) return a == 1 ? (T)1 : a == -1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0;
  uint64_t r = 1, x = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e != 0; e >>= 1) {
    if (e & 1) r *= x;
    x *= x;
  }
  return (T)r;
}
template <class T> ZC_FN T zc_max(T a, T b) { return a != a ? a : b != b ? b : (a > b ? a : b); }
template <class T> ZC_FN T zc_min(T a, T b) { return a != a ? a : b != b ? b : (a < b ? a : b); }
)HELPERS";

}  // namespace zc::codegen
