// The counter-based generator behind rand_like and randn_like: Philox4x32-10 (Salmon et al.,
// "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011; the generator torch and JAX draw GPU
// randomness with). The draw of element i under seed s is the first word of Philox's block for
// counter (i, 0) and key s, so any element is computed on its own, in any order, on any device, and
// a kernel that recomputes a mask gets the same one. Generated code carries the same functions
// as text (codegen/c_helpers.h: zc_rand_uniform, zc_rand_normal); tests/unit/rand_like_test.cpp
// checks that the two agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

namespace zc::ops {

// The first two words of Philox's block for counter (index, 0) under key `seed`.
struct PhiloxWords {
  uint32_t w0, w1;
};
inline PhiloxWords philox_words(uint64_t seed, uint64_t index) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32), c2 = 0,
           c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  // Unrolled, so that a loop over elements around this one vectorizes.
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1};
}

inline uint32_t philox_first_word(uint64_t seed, uint64_t index) {
  return philox_words(seed, index).w0;
}

// Uniform in [0, 1): the first word's top 24 bits, every float of the form k / 2^24.
inline float philox_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(philox_first_word(seed, index) >> 8) * (1.0f / 16777216.0f);
}

// Standard normal: Box-Muller's cosine branch over u1 in (0, 1] (the first word, so log stays
// finite) and u2 in [0, 1) (the second), in float with the C library's logf, sqrtf and cosf,
// which generated C++ calls too (its values equal these; CUDA's functions differ by an ulp or
// two). |z| is at most sqrt(-2 log 2^-24), about 5.77.
inline float philox_normal(uint64_t seed, uint64_t index) {
  const PhiloxWords w = philox_words(seed, index);
  const float u1 = static_cast<float>((w.w0 >> 8) + 1u) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>(w.w1 >> 8) * (1.0f / 16777216.0f);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831855f * u2);
}

}  // namespace zc::ops
