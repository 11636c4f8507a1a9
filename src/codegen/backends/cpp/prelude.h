// The fixed head of every generated source: the ABI, 16-bit float conversions and the math
// helpers whose semantics must equal the eager kernels'. The helpers both C-like backends
// share (c_helpers.h) follow it, with ZC_FN as defined at its end.
#pragma once

namespace zc::codegen::cpp {

inline constexpr const char* kPrelude = R"PRELUDE(#include <stdint.h>
#include <string.h>

// The C library's math, declared here rather than by <math.h>: parsing that header took 25 ms
// of every compile here, a fifth of a small graph's. GCC and Clang know these functions by
// name and inline the ones the CPU has instructions for (sqrtf, floorf, fabsf).
extern "C" {
float expf(float);
double exp(double);
float logf(float);
double log(double);
float sqrtf(float);
double sqrt(double);
double tanh(double);
double erf(double);
float fabsf(float);
double fabs(double);
float powf(float, float);
double pow(double, double);
float floorf(float);
double floor(double);
float ceilf(float);
double ceil(double);
float truncf(float);
double trunc(double);
float nearbyintf(float);
double nearbyint(double);
float sinf(float);
double sin(double);
float cosf(float);
double cos(double);
float asinf(float);
double asin(double);
float acosf(float);
double acos(double);
float atanf(float);
double atan(double);
float fmodf(float, float);
double fmod(double, double);
float ldexpf(float, int);
// Scratch of kernels whose blocks are sized at run time (attention).
void* malloc(__SIZE_TYPE__);
void free(void*);
// Nests whose sizes vary share themselves out by hand (kernel_emitter.h, open_loops).
int omp_get_thread_num(void);
int omp_get_num_threads(void);
}
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
// A kernel whose loops are exponentials over cache-resident blocks (attention) vectorizes 16
// floats wide where the CPU has AVX-512; GCC's default for -march=native there is 8, which
// suits the rest (docs/codegen.md, "Attention"). Clang has no such switch.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define ZC_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define ZC_WIDE
#endif
// Before a loop over an inline product's rows whose inner loop, over the columns, is the one to
// vectorize: Clang otherwise unrolled the columns and vectorized across rows with gathers and
// scatters (seed64's kernels 21.5 -> 13.9 us with Clang 14 here). GCC keeps the inner loop.
#if defined(__clang__)
#define ZC_ROW_LOOP _Pragma("clang loop vectorize(disable)")
#else
#define ZC_ROW_LOOP
#endif
// Sixteen floats as one value: a small product keeps its rows in these, in registers, where an
// array's elements went through memory at every step. One vector of GCC's and Clang's
// extension where the CPU has 16-float registers (AVX-512); elsewhere the registers' width in
// parts of a struct, which stays in registers: a 16-float vector type was kept on the stack
// there and moved 16 bytes at a time (seed64 at x86-64-v3: 79 us, 6x the AVX-512 code).
#if defined(__AVX512F__)
typedef float zc_vf16 __attribute__((vector_size(64)));
#else
#if defined(__AVX__)
typedef float zc_vpart __attribute__((vector_size(32)));
struct zc_vf16 {
  zc_vpart p0, p1;
};
#define ZC_VPARTS(F) F(p0) F(p1)
#else
typedef float zc_vpart __attribute__((vector_size(16)));
struct zc_vf16 {
  zc_vpart p0, p1, p2, p3;
};
#define ZC_VPARTS(F) F(p0) F(p1) F(p2) F(p3)
#endif
// What the products do with a row: accumulate a scalar times a row of B. A brace list of up to
// 16 floats fills the parts in order (brace elision), as it fills the vector.
static inline zc_vf16& operator+=(zc_vf16& c, const zc_vf16& x) {
#define ZC_ADD(p) c.p += x.p;
  ZC_VPARTS(ZC_ADD)
#undef ZC_ADD
  return c;
}
static inline zc_vf16 operator*(float a, const zc_vf16& b) {
  zc_vf16 r;
#define ZC_MUL(p) r.p = a * b.p;
  ZC_VPARTS(ZC_MUL)
#undef ZC_MUL
  return r;
}
#endif

static inline float zc_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (exp == 0) {
    float v = ldexpf((float)mant, -24);
    memcpy(&u, &v, 4);
    u |= sign;
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t zc_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
  if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (mag < 0x38800000u) {
    float a;
    memcpy(&a, &mag, 4);
    return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
  }
  uint32_t h = (((mag >> 23) - 112) << 10) | ((mag >> 13) & 0x3ffu), rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}
static inline float zc_bf2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t zc_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
// exp and tanh in float without branches or libm calls, so loops that use them vectorize:
// Cephes' range reduction and polynomials, within 2 ulp of the correctly rounded result.
// Always inlined, as zc_erff below: GCC's -O2 limits on a unit's growth left calls to them in
// loops of kernels with several (an LSTM step's three sigmoids and two tanhs), which then did
// not vectorize: 1.3 us a step's 48 elements where vectorized they take 0.1.
static inline __attribute__((always_inline)) float zc_ldexp2(float y, int n) {
  // y * 2^n for n in [-252, 254], in two steps so that 2^n stays a normal float (a shift,
  // not n / 2: that rounds toward zero, which took two more instructions per vector).
  int n1 = n >> 1, n2 = n - n1;
  uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, 4);
  memcpy(&s2, &b2, 4);
  return y * s1 * s2;
}
static inline __attribute__((always_inline)) float zc_expf(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float fx = floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - fx * 0.693359375f + fx * 2.12194440e-4f;
  float z = r * r;
  float p = ((((1.9875691500E-4f * r + 1.3981999507E-3f) * r + 8.3334519073E-3f) * r +
              4.1665795894E-2f) * r + 1.6666665459E-1f) * r + 5.0000001201E-1f;
  // A NaN needs no test of its own: the clamps keep it (a comparison with it is false), and
  // p, so y, is NaN whatever scale its conversion to int makes. The test cost 7% of seed64's
  // kernels here.
  float y = zc_ldexp2(p * z + r + 1.0f, (int)fx);
  return x > 88.72283935546875f ? INFINITY : y;
}
static inline __attribute__((always_inline)) float zc_tanhf(float x) {
  float ax = fabsf(x), z = x * x;
  float small = x + x * z * ((((-5.70498872745E-3f * z + 2.06390887954E-2f) * z -
                               5.37397155531E-2f) * z + 1.33314422036E-1f) * z -
                             3.33332819422E-1f);
  float big = 1.0f - 2.0f / (zc_expf(2.0f * ax) + 1.0f);
  big = x < 0 ? -big : big;
  return ax < 0.625f ? small : big;
}
// erf in float without a call, so loops of it vectorize (the C library's erff is a call per
// element: a TorchScript export's GELU, x * (1 + erf(x / sqrt 2)) / 2 after a product, took 85
// us at 128x32 on the 2-core machine, 0.45 ns an element now against 8). |x| < 1: x P(x^2);
// up to 4: 1 - exp(-x^2) Q(1/|x|); beyond, 1. P and Q are least-squares fits of their
// relative error (scripts/fit-erf.py); the result is within 3 ulp (1.4e-7) of erf over
// [-7, 7]. NaN stays NaN (the comparisons are false and the small branch is taken). Always
// inlined, with zc_erf: GCC's -O2 limits left the call in an OpenMP loop's body, whose loop then
// did not vectorize.
static inline __attribute__((always_inline)) float zc_erff(float x) {
  float ax = fabsf(x), u = x * x;
  float small = x * (((((-5.667995110e-04f * u + 4.927419831e-03f) * u - 2.672089357e-02f) * u +
                       1.128057887e-01f) * u - 3.761239068e-01f) * u + 1.128379147e+00f);
  float a = ax < 1.0f ? 1.0f : (ax > 4.0f ? 4.0f : ax);
  float t = 1.0f / a;
  float q = (((((((-1.207988462e-02f * t + 4.147293369e-02f) * t - 3.256680628e-03f) * t -
                 2.105932277e-01f) * t + 4.749651454e-01f) * t - 4.620603851e-01f) * t +
              3.947317202e-02f) * t + 5.594154848e-01f) * t + 2.469873515e-04f;
  // Computed whatever x is, then selected: a call in one arm of a choice is control flow,
  // which keeps the loop from vectorizing.
  float big = 1.0f - zc_expf(-a * a) * q;
  big = ax >= 4.0f ? 1.0f : big;
  big = x < 0 ? -big : big;
  return ax < 1.0f ? small : big;
}
// The helpers op expressions call (ops/elementwise.h), for float and double; exp, tanh and erf
// in float are the vectorizable ones above.
static inline __attribute__((always_inline)) float zc_exp(float x) { return zc_expf(x); }
static inline double zc_exp(double x) { return exp(x); }
static inline float zc_log(float x) { return logf(x); }
static inline double zc_log(double x) { return log(x); }
static inline float zc_sqrt(float x) { return sqrtf(x); }
static inline double zc_sqrt(double x) { return sqrt(x); }
static inline __attribute__((always_inline)) float zc_tanh(float x) { return zc_tanhf(x); }
static inline double zc_tanh(double x) { return tanh(x); }
static inline __attribute__((always_inline)) float zc_erf(float x) { return zc_erff(x); }
static inline double zc_erf(double x) { return erf(x); }
static inline float zc_fabs(float x) { return fabsf(x); }
static inline double zc_fabs(double x) { return fabs(x); }
static inline float zc_pow(float a, float b) { return powf(a, b); }
static inline double zc_pow(double a, double b) { return pow(a, b); }
static inline float zc_square(float x) { return x * x; }
static inline double zc_square(double x) { return x * x; }
static inline float zc_cube(float x) { return x * x * x; }
static inline double zc_cube(double x) { return x * x * x; }
// One instruction each where the CPU rounds in hardware (SSE4.1, AVX-512, NEON), so loops of
// them vectorize. zc_round takes halves to even: nearbyint in the default rounding mode.
static inline float zc_floor(float x) { return floorf(x); }
static inline double zc_floor(double x) { return floor(x); }
static inline float zc_ceil(float x) { return ceilf(x); }
static inline double zc_ceil(double x) { return ceil(x); }
static inline float zc_round(float x) { return nearbyintf(x); }
static inline double zc_round(double x) { return nearbyint(x); }
static inline float zc_trunc(float x) { return truncf(x); }
static inline double zc_trunc(double x) { return trunc(x); }
// The C library's, which the eager kernels call too: the same values, a call per element.
static inline float zc_sin(float x) { return sinf(x); }
static inline double zc_sin(double x) { return sin(x); }
static inline float zc_cos(float x) { return cosf(x); }
static inline double zc_cos(double x) { return cos(x); }
static inline float zc_asin(float x) { return asinf(x); }
static inline double zc_asin(double x) { return asin(x); }
static inline float zc_acos(float x) { return acosf(x); }
static inline double zc_acos(double x) { return acos(x); }
static inline float zc_atan(float x) { return atanf(x); }
static inline double zc_atan(double x) { return atan(x); }
static inline float zc_fmod(float a, float b) { return fmodf(a, b); }
static inline double zc_fmod(double a, double b) { return fmod(a, b); }
#define ZC_FN static inline
)PRELUDE";

}  // namespace zc::codegen::cpp
