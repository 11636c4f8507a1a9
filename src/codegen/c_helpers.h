// The helpers that generated code of every C-like backend shares, written once: integer powers
// with wrap-around, remainders, max/min that propagate NaN and the counter-based random draws,
// as the eager kernels compute them (ops/elementwise.h names them). A backend's prelude defines
// ZC_FN, its qualifiers for a helper function (`static inline`, or `static __device__
// __forceinline__` on CUDA), and the emitter writes this text right after it.
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
// Integer remainders as the eager kernels compute them: a divisor of 0 gives 0 and one of -1
// gives 0 without dividing (C's % is undefined for both, and traps on x86).
template <class T> ZC_FN T zc_ifmod(T a, T b) { return b == 0 || b == -1 ? (T)0 : (T)(a % b); }
template <class T> ZC_FN T zc_iremainder(T a, T b) {
  T r = zc_ifmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? (T)(r + b) : r;
}
// The floating remainder with the divisor's sign (Python's %): fmod's moved by one divisor
// when the signs differ; a zero takes the divisor's sign.
template <class T> ZC_FN T zc_remainder(T a, T b) {
  T r = zc_fmod(a, b);
  return r != 0 ? ((r < 0) != (b < 0) ? r + b : r) : (b < 0 ? -(T)0 : (T)0);
}
template <class T> ZC_FN T zc_max(T a, T b) { return a != a ? a : b != b ? b : (a > b ? a : b); }
template <class T> ZC_FN T zc_min(T a, T b) { return a != a ? a : b != b ? b : (a < b ? a : b); }
// The first two words of Philox4x32-10's block for counter (index, 0) under key `seed`, as
// ops/philox.h computes them; rand_like and randn_like draw from them. The ten rounds are
// written out: GCC at -O2 vectorizes no loop around an inner loop, and the elementwise loop
// around a draw is what should run 16 lanes wide.
ZC_FN void zc_philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                           uint32_t k1) {
  uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
  uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
  c1 = (uint32_t)p1;
  c3 = (uint32_t)p0;
  c0 = n0;
  c2 = n2;
}
ZC_FN void zc_philox(uint64_t seed, uint64_t index, uint32_t& w0, uint32_t& w1) {
  uint32_t c0 = (uint32_t)index, c1 = (uint32_t)(index >> 32), c2 = 0, c3 = 0;
  const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  zc_philox_round(c0, c1, c2, c3, k0, k1);
  zc_philox_round(c0, c1, c2, c3, k0 + 0x9E3779B9u, k1 + 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 2u * 0x9E3779B9u, k1 + 2u * 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 3u * 0x9E3779B9u, k1 + 3u * 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 4u * 0x9E3779B9u, k1 + 4u * 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 5u * 0x9E3779B9u, k1 + 5u * 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 6u * 0x9E3779B9u, k1 + 6u * 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 7u * 0x9E3779B9u, k1 + 7u * 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 8u * 0x9E3779B9u, k1 + 8u * 0xBB67AE85u);
  zc_philox_round(c0, c1, c2, c3, k0 + 9u * 0x9E3779B9u, k1 + 9u * 0xBB67AE85u);
  w0 = c0;
  w1 = c1;
}
// rand_like's draw for element `index`: the first word's top 24 bits as a float in [0, 1).
ZC_FN float zc_rand_uniform(uint64_t seed, uint64_t index) {
  uint32_t w0, w1;
  zc_philox(seed, index, w0, w1);
  return (float)(w0 >> 8) * (1.0f / 16777216.0f);
}
// randn_like's: Box-Muller over both words (ops/philox.h: philox_normal).
ZC_FN float zc_rand_normal(uint64_t seed, uint64_t index) {
  uint32_t w0, w1;
  zc_philox(seed, index, w0, w1);
  const float u1 = (float)((w0 >> 8) + 1u) * (1.0f / 16777216.0f);
  const float u2 = (float)(w1 >> 8) * (1.0f / 16777216.0f);
  return zc_sqrt(-2.0f * zc_log(u1)) * cosf(6.2831855f * u2);
}
)HELPERS";

}  // namespace zc::codegen
