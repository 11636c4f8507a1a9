// A naive float64 reference for the eager ops, written without any of the library's kernels:
// tensors are read element by element through their shape, strides and raw bytes (with our own
// f16/bf16 decoding), and every op is a plain loop over multi-indices. Slow on purpose; it only
// has to be obviously right.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "zc/dtype.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace zc::ref {

// A dtype by name, for SCOPED_TRACE lines.
inline std::string name_of(DType t) {
  return std::string(zc::dtype_name(t));
}

// ---------------------------------------------------------------------------------------------
// 16-bit float formats, decoded and encoded from first principles (IEEE layout, round to
// nearest even), so that the library's Half/BFloat16 can be checked against them.

// Bits of `x` in a binary format with `exp_bits` exponent and `mant_bits` mantissa bits.
inline uint32_t encode_float_format(double x, int exp_bits, int mant_bits) {
  const uint32_t sign = std::signbit(x) ? 1u << (exp_bits + mant_bits) : 0u;
  const uint32_t exp_all = (1u << exp_bits) - 1;
  if (std::isnan(x)) return sign | (exp_all << mant_bits) | (1u << (mant_bits - 1));
  const int bias = (1 << (exp_bits - 1)) - 1;
  const double a = std::fabs(x);
  // Halfway between the largest finite value and the next power of two rounds to infinity.
  const double overflow = std::ldexp(2.0 - std::ldexp(1.0, -mant_bits - 1), bias);
  if (std::isinf(x) || a >= overflow) return sign | (exp_all << mant_bits);
  const int emin = 1 - bias;
  if (a < std::ldexp(1.0, emin)) {
    // Subnormal: multiples of 2^(emin - mant_bits); a carry into the exponent field is the
    // correct encoding of the smallest normal.
    double q = std::nearbyint(std::ldexp(a, mant_bits - emin));
    return sign | static_cast<uint32_t>(q);
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;
  double q = std::nearbyint((std::ldexp(a, -e) - 1.0) * std::ldexp(1.0, mant_bits));
  if (q == std::ldexp(1.0, mant_bits)) {
    q = 0;
    e += 1;
  }
  return sign | (static_cast<uint32_t>(e + bias) << mant_bits) | static_cast<uint32_t>(q);
}

inline double decode_float_format(uint32_t bits, int exp_bits, int mant_bits) {
  const bool neg = (bits >> (exp_bits + mant_bits)) & 1u;
  const uint32_t e = (bits >> mant_bits) & ((1u << exp_bits) - 1);
  const uint32_t m = bits & ((1u << mant_bits) - 1);
  const int bias = (1 << (exp_bits - 1)) - 1;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);
  } else if (e == (1u << exp_bits) - 1) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mant_bits),
                   static_cast<int>(e) - bias);
  }
  return neg ? -v : v;
}

// The library converts to 16-bit floats from float, so the reference rounds from float too.
inline uint16_t half_bits(float f) {
  return static_cast<uint16_t>(encode_float_format(f, 5, 10));
}
inline uint16_t bf16_bits(float f) {
  return static_cast<uint16_t>(encode_float_format(f, 8, 7));
}
inline double half_value(uint16_t b) {
  return decode_float_format(b, 5, 10);
}
inline double bf16_value(uint16_t b) {
  return decode_float_format(b, 8, 7);
}

// The value a dtype stores for `v` (C++ conversion semantics: truncation to integers).
inline double round_to(double v, DType t) {
  switch (t) {
    case DType::f32:
      return static_cast<float>(v);
    case DType::f64:
      return v;
    case DType::f16:
      return half_value(half_bits(static_cast<float>(v)));
    case DType::bf16:
      return bf16_value(bf16_bits(static_cast<float>(v)));
    case DType::i64:
      return static_cast<double>(static_cast<int64_t>(v));
    case DType::i32:
      return static_cast<double>(static_cast<int32_t>(v));
    case DType::i8:
      return static_cast<double>(static_cast<int8_t>(static_cast<int32_t>(v)));
    case DType::boolean:
      return v != 0 ? 1.0 : 0.0;
  }
  return v;
}

template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void put(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

inline double load(const char* p, DType t) {
  switch (t) {
    case DType::f32:
      return get<float>(p);
    case DType::f64:
      return get<double>(p);
    case DType::f16:
      return half_value(get<uint16_t>(p));
    case DType::bf16:
      return bf16_value(get<uint16_t>(p));
    case DType::i64:
      return static_cast<double>(get<int64_t>(p));
    case DType::i32:
      return get<int32_t>(p);
    case DType::i8:
      return get<int8_t>(p);
    case DType::boolean:
      return get<uint8_t>(p) ? 1.0 : 0.0;
  }
  return 0;
}

inline void store(char* p, DType t, double x) {
  switch (t) {
    case DType::f32:
      return put(p, static_cast<float>(x));
    case DType::f64:
      return put(p, x);
    case DType::f16:
      return put(p, half_bits(static_cast<float>(x)));
    case DType::bf16:
      return put(p, bf16_bits(static_cast<float>(x)));
    case DType::i64:
      return put(p, static_cast<int64_t>(x));
    case DType::i32:
      return put(p, static_cast<int32_t>(x));
    case DType::i8:
      return put(p, static_cast<int8_t>(static_cast<int32_t>(x)));
    case DType::boolean:
      return put(p, static_cast<uint8_t>(x != 0));
  }
}

// ---------------------------------------------------------------------------------------------
// Arr: a row-major array of doubles, the reference's only data structure.

struct Arr {
  Shape shape;
  std::vector<double> v;
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
};

inline int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

inline std::string show(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  return r + "]";
}

// Reads any tensor by walking its multi-indices through its strides.
inline Arr read(const Tensor& t) {
  Arr a{t.shape(), {}};
  const int64_t n = numel_of(a.shape);
  a.v.resize(n);
  if (n == 0) return a;
  const char* base = static_cast<const char*>(t.raw_data());
  const size_t es = dtype_size(t.dtype());
  for (int64_t i = 0; i < n; ++i) {
    auto idx = unravel(i, a.shape);
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    a.v[i] = load(base + off * static_cast<int64_t>(es), t.dtype());
  }
  return a;
}

enum class Layout { contiguous, column_major, strided };

// A tensor holding `a` (converted to `dt`) in the given layout, built on a storage we fill
// ourselves: column_major reverses the strides, strided leaves a gap after every element of
// every dim and starts at a nonzero offset (what a slice with step 2 produces).
inline Tensor make(const Arr& a, DType dt, Layout layout = Layout::contiguous) {
  const int64_t nd = a.dim();
  Shape strides(nd);
  int64_t span = 1, offset = 0;
  if (layout == Layout::column_major) {
    for (int64_t d = 0; d < nd; ++d) {
      strides[d] = span;
      span *= std::max<int64_t>(a.shape[d], 1);
    }
  } else {
    const int64_t gap = layout == Layout::strided ? 2 : 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      strides[d] = span * gap;
      span *= std::max<int64_t>(a.shape[d], 1) * gap;
    }
    if (layout == Layout::strided) offset = 3;
  }
  const size_t es = dtype_size(dt);
  auto storage = std::make_shared<Storage>(static_cast<size_t>(span + offset) * es, Device::cpu());
  std::memset(storage->data(), 0, storage->nbytes());
  char* base = static_cast<char*>(storage->data()) + offset * es;
  for (int64_t i = 0; i < a.numel(); ++i) {
    auto idx = unravel(i, a.shape);
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += idx[d] * strides[d];
    store(base + off * static_cast<int64_t>(es), dt, a.v[i]);
  }
  return Tensor::view_of(storage, a.shape, strides, offset, dt);
}

// A packed array P with P.permute(perm) == a.
inline Arr permuted_source(const Arr& a, const std::vector<int64_t>& perm) {
  Arr p{a.shape, a.v};
  for (int64_t i = 0; i < a.dim(); ++i) p.shape[perm[i]] = a.shape[i];
  std::vector<int64_t> j(a.dim());
  for (int64_t k = 0; k < a.numel(); ++k) {
    auto idx = unravel(k, a.shape);
    for (int64_t i = 0; i < a.dim(); ++i) j[perm[i]] = idx[i];
    p.v[ravel(j, p.shape)] = a.v[k];
  }
  return p;
}

// `a` produced by the library's own view ops: a transpose and a rotating permute of packed
// tensors, and a step-2 slice of a taller tensor whose skipped rows hold NaN (77 for integer
// types), so that reading a wrong row shows in the result.
inline std::vector<std::pair<std::string, Tensor>> library_views(const Arr& a, DType dt) {
  std::vector<std::pair<std::string, Tensor>> r;
  const int64_t nd = a.dim();
  if (nd == 0) return r;
  std::vector<int64_t> swap_ends(nd), rotate(nd);
  std::iota(swap_ends.begin(), swap_ends.end(), 0);
  std::swap(swap_ends[0], swap_ends[nd - 1]);
  for (int64_t i = 0; i < nd; ++i) rotate[i] = (i + 1) % nd;
  if (nd >= 2)
    r.emplace_back("transpose", make(permuted_source(a, swap_ends), dt).transpose(0, nd - 1));
  if (nd >= 3) r.emplace_back("permute", make(permuted_source(a, rotate), dt).permute(rotate));
  Arr tall{a.shape, {}};
  tall.shape[0] = 2 * a.shape[0] + 1;
  const double junk = is_floating(dt) ? std::numeric_limits<double>::quiet_NaN() : 77.0;
  tall.v.assign(numel_of(tall.shape), junk);
  const int64_t row = a.shape[0] ? a.numel() / a.shape[0] : 0;
  for (int64_t k = 0; k < a.numel(); ++k) tall.v[(2 * (k / row) + 1) * row + k % row] = a.v[k];
  r.emplace_back("slice_step2", make(tall, dt).slice(0, 1, tall.shape[0], 2));
  return r;
}

// The same logical values laid out every way: packed, two strided layouts we build ourselves,
// and the library's own views.
inline std::vector<std::pair<std::string, Tensor>> inputs(const Arr& a, DType dt) {
  std::vector<std::pair<std::string, Tensor>> r{{"contiguous", make(a, dt)},
                                                {"column_major", make(a, dt, Layout::column_major)},
                                                {"strided", make(a, dt, Layout::strided)}};
  for (auto& v : library_views(a, dt)) r.push_back(v);
  return r;
}

// Uniform values in [lo, hi) from the library's seeded generator (the generator itself is
// tested separately).
inline Arr uniform(const Shape& shape, double lo, double hi) {
  Arr u = read(zc::rand(shape, DType::f64));
  for (double& x : u.v) x = lo + (hi - lo) * x;
  return u;
}

// Small integers in [lo, hi], so that comparisons see ties and integer ops stay exact.
inline Arr small_ints(const Shape& shape, int lo, int hi) {
  Arr u = uniform(shape, 0, 1);
  for (double& x : u.v) x = lo + std::floor(x * (hi - lo + 1));
  return u;
}

inline Arr constant(const Shape& shape, double value) {
  return Arr{shape, std::vector<double>(numel_of(shape), value)};
}

inline Shape random_shape(std::mt19937& rng, int min_dims, int max_dims, int max_size) {
  std::uniform_int_distribution<int> nd(min_dims, max_dims), sz(1, max_size);
  Shape s(nd(rng));
  for (auto& d : s) d = sz(rng);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Elementwise with broadcasting.

inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The element of `a` that lands at `idx` of the broadcast shape.
inline double bget(const Arr& a, const std::vector<int64_t>& idx) {
  const size_t lead = idx.size() - a.shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    flat = flat * a.shape[d] + (a.shape[d] == 1 ? 0 : idx[lead + d]);
  }
  return a.v[flat];
}

template <class F>
Arr map(const Arr& a, F f) {
  Arr r{a.shape, a.v};
  for (double& x : r.v) x = f(x);
  return r;
}

template <class F>
Arr zip(const Arr& a, const Arr& b, F f) {
  Arr r{broadcast_shape(a.shape, b.shape), {}};
  r.v.resize(numel_of(r.shape));
  for (int64_t i = 0; i < r.numel(); ++i) {
    auto idx = unravel(i, r.shape);
    r.v[i] = f(bget(a, idx), bget(b, idx));
  }
  return r;
}

inline Arr where(const Arr& c, const Arr& a, const Arr& b) {
  Arr r{broadcast_shape(c.shape, broadcast_shape(a.shape, b.shape)), {}};
  r.v.resize(numel_of(r.shape));
  for (int64_t i = 0; i < r.numel(); ++i) {
    auto idx = unravel(i, r.shape);
    r.v[i] = bget(c, idx) != 0 ? bget(a, idx) : bget(b, idx);
  }
  return r;
}

inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
inline double gelu(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
inline double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// ---------------------------------------------------------------------------------------------
// Reductions: every output element sees its inputs in row-major order, so the position in
// that list is the flattened index over the reduced dims (what argmax returns).

using ReduceFn = std::function<double(const std::vector<double>&)>;

inline std::vector<int64_t> norm_dims(std::vector<int64_t> dims, int64_t nd) {
  if (dims.empty()) {
    dims.resize(nd);
    std::iota(dims.begin(), dims.end(), 0);
  }
  for (auto& d : dims) d = d < 0 ? d + nd : d;
  std::sort(dims.begin(), dims.end());
  return dims;
}

inline Arr reduce(const Arr& a, std::vector<int64_t> dims, bool keepdim, const ReduceFn& f) {
  dims = norm_dims(dims, a.dim());
  std::vector<bool> red(a.dim(), false);
  for (auto d : dims) red[d] = true;
  Shape kept;  // the output shape with keepdim, used for indexing
  Shape out;
  for (int64_t d = 0; d < a.dim(); ++d) {
    kept.push_back(red[d] ? 1 : a.shape[d]);
    if (!red[d] || keepdim) out.push_back(red[d] ? 1 : a.shape[d]);
  }
  std::vector<std::vector<double>> buckets(numel_of(kept));
  for (int64_t i = 0; i < a.numel(); ++i) {
    auto idx = unravel(i, a.shape);
    for (int64_t d = 0; d < a.dim(); ++d)
      if (red[d]) idx[d] = 0;
    buckets[ravel(idx, kept)].push_back(a.v[i]);
  }
  Arr r{out, {}};
  for (auto& b : buckets) r.v.push_back(f(b));
  return r;
}

inline double r_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
inline double r_abs_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::fabs(x);
  return s;
}
inline double r_mean(const std::vector<double>& v) {
  return r_sum(v) / v.size();
}
inline double r_max(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}
inline double r_min(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}
inline double r_argmax(const std::vector<double>& v) {
  return static_cast<double>(std::max_element(v.begin(), v.end()) - v.begin());  // first max
}
inline ReduceFn r_var(int64_t correction) {
  return [correction](const std::vector<double>& v) {
    double m = r_mean(v), s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return s / (static_cast<double>(v.size()) - static_cast<double>(correction));
  };
}

// Applies f to every 1-D line along `dim` (softmax and friends).
inline Arr along(const Arr& a, int64_t dim,
                 const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  if (dim < 0) dim += a.dim();
  Arr r = a;
  const int64_t n = a.shape[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < a.dim(); ++d) inner *= a.shape[d];
  const int64_t outer = a.numel() / std::max<int64_t>(n * inner, 1);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> line(n);
      for (int64_t k = 0; k < n; ++k) line[k] = a.v[(o * n + k) * inner + i];
      auto res = f(line);
      for (int64_t k = 0; k < n; ++k) r.v[(o * n + k) * inner + i] = res[k];
    }
  }
  return r;
}

inline std::vector<double> softmax_line(const std::vector<double>& x) {
  double m = r_max(x), s = 0;
  std::vector<double> e(x.size());
  for (size_t i = 0; i < x.size(); ++i) s += e[i] = std::exp(x[i] - m);
  for (auto& v : e) v /= s;
  return e;
}
inline std::vector<double> log_softmax_line(const std::vector<double>& x) {
  double m = r_max(x), s = 0;
  for (double v : x) s += std::exp(v - m);
  std::vector<double> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = x[i] - m - std::log(s);
  return r;
}
inline Arr softmax(const Arr& a, int64_t dim) {
  return along(a, dim, softmax_line);
}
inline Arr log_softmax(const Arr& a, int64_t dim) {
  return along(a, dim, log_softmax_line);
}

// Normalizes over the trailing `nd` dims; weight/bias are optional, shaped like those dims.
inline Arr layer_norm(const Arr& x, int64_t nd, const Arr* w, const Arr* b, double eps) {
  int64_t inner = 1;
  for (int64_t d = x.dim() - nd; d < x.dim(); ++d) inner *= x.shape[d];
  Arr r = x;
  for (int64_t o = 0; o < x.numel() / inner; ++o) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < inner; ++i) m += x.v[o * inner + i];
    m /= inner;
    for (int64_t i = 0; i < inner; ++i) v += std::pow(x.v[o * inner + i] - m, 2);
    v /= inner;  // biased, as torch.layer_norm
    for (int64_t i = 0; i < inner; ++i) {
      double y = (x.v[o * inner + i] - m) / std::sqrt(v + eps);
      if (w) y *= w->v[i];
      if (b) y += b->v[i];
      r.v[o * inner + i] = y;
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// matmul with numpy semantics: 1-D operands get a dim prepended/appended (and removed again),
// leading dims broadcast.

inline Arr matmul(const Arr& a0, const Arr& b0) {
  Arr a = a0, b = b0;
  const bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  if (a1) a.shape.insert(a.shape.begin(), 1);
  if (b1) b.shape.push_back(1);
  const int64_t M = a.shape[a.dim() - 2], K = a.shape[a.dim() - 1], N = b.shape[b.dim() - 1];
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Shape batch = broadcast_shape(ba, bb);
  Arr ap{ba, std::vector<double>(numel_of(ba))}, bp{bb, std::vector<double>(numel_of(bb))};
  std::iota(ap.v.begin(), ap.v.end(), 0.0);  // batch index lookup tables
  std::iota(bp.v.begin(), bp.v.end(), 0.0);
  Shape out = batch;
  out.push_back(M);
  out.push_back(N);
  Arr r{out, std::vector<double>(numel_of(out))};
  for (int64_t p = 0; p < numel_of(batch); ++p) {
    auto idx = unravel(p, batch);
    auto ia = static_cast<int64_t>(bget(ap, idx)), ib = static_cast<int64_t>(bget(bp, idx));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a.v[(ia * M + m) * K + k] * b.v[(ib * K + k) * N + n];
        r.v[(p * M + m) * N + n] = s;
      }
  }
  if (a1) r.shape.erase(r.shape.end() - 2);
  if (b1) r.shape.pop_back();
  return r;
}

// For tolerances: |a| @ |b|, the scale of the rounding error of each dot product.
inline Arr abs_matmul(const Arr& a, const Arr& b) {
  return matmul(map(a, [](double x) { return std::fabs(x); }),
                map(b, [](double x) { return std::fabs(x); }));
}

inline Arr transpose_last2(const Arr& a) {
  Arr r = a;
  const int64_t R = a.shape[a.dim() - 2], C = a.shape[a.dim() - 1];
  std::swap(r.shape[a.dim() - 2], r.shape[a.dim() - 1]);
  for (int64_t p = 0; p < a.numel() / std::max<int64_t>(R * C, 1); ++p)
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) r.v[(p * C + j) * R + i] = a.v[(p * R + i) * C + j];
  return r;
}

inline Arr embedding(const Arr& w, const Arr& idx) {
  const int64_t d = w.shape[1];
  Arr r{idx.shape, {}};
  r.shape.push_back(d);
  for (double i : idx.v)
    for (int64_t j = 0; j < d; ++j) r.v.push_back(w.v[static_cast<int64_t>(i) * d + j]);
  return r;
}

inline Arr cat(const std::vector<Arr>& xs, int64_t dim) {
  if (dim < 0) dim += xs[0].dim();
  Shape out = xs[0].shape;
  out[dim] = 0;
  for (auto& x : xs) out[dim] += x.shape[dim];
  Arr r{out, std::vector<double>(numel_of(out))};
  int64_t base = 0;
  for (auto& x : xs) {
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto idx = unravel(i, x.shape);
      idx[dim] += base;
      r.v[ravel(idx, out)] = x.v[i];
    }
    base += x.shape[dim];
  }
  return r;
}

// softmax(q k^T * scale [, masked above the diagonal when causal]) v over [..., T, D], with a
// mask `add` [batch..., T, S] (q's batch, dense) added to the scaled scores
// (-inf: the key is hidden); a row that sees no key is zeros.
inline Arr attention_masked(const Arr& q, const Arr& k, const Arr& v, const Arr& add, bool causal,
                            double scale) {
  const int64_t T = q.shape[q.dim() - 2], D = q.shape[q.dim() - 1];
  const int64_t S = k.shape[k.dim() - 2], Dv = v.shape[v.dim() - 1];
  Shape out = q.shape;
  out.back() = Dv;
  Arr r{out, std::vector<double>(numel_of(out))};
  for (int64_t p = 0; p < q.numel() / std::max<int64_t>(T * D, 1); ++p) {
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> logits;
      bool any = false;
      for (int64_t s = 0; s < S; ++s) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q.v[(p * T + t) * D + d] * k.v[(p * S + s) * D + d];
        const double x = causal && s > t ? -INFINITY : dot * scale + add.v[(p * T + t) * S + s];
        any = any || x != -INFINITY;
        logits.push_back(x);
      }
      if (!any) continue;  // zeros
      auto w = softmax_line(logits);
      for (int64_t e = 0; e < Dv; ++e) {
        double acc = 0;
        for (int64_t s = 0; s < S; ++s) acc += w[s] * v.v[(p * S + s) * Dv + e];
        r.v[(p * T + t) * Dv + e] = acc;
      }
    }
  }
  return r;
}

// The same without a mask; the scale defaults to 1/sqrt(D).
inline Arr attention(const Arr& q, const Arr& k, const Arr& v, bool causal,
                     std::optional<double> scale) {
  const int64_t D = q.shape[q.dim() - 1], S = k.shape[k.dim() - 2];
  Shape scores = q.shape;
  scores.back() = S;
  return attention_masked(q, k, v, Arr{scores, std::vector<double>(numel_of(scores))}, causal,
                          scale ? *scale : 1.0 / std::sqrt(static_cast<double>(D)));
}

// ---------------------------------------------------------------------------------------------
// Comparison. Element i passes when |got - want| <= atol + rtol * |want| (+ scale_i * srel when
// a per-element error scale is given); NaN matches NaN and infinities must match exactly.

struct Tol {
  double rtol = 0, atol = 0;
};

// Tolerances for one elementwise result: a few ulps of the result's type (the library computes
// 16-bit types in float and rounds once, so half an ulp plus float noise).
inline Tol pointwise_tol(DType t) {
  switch (t) {
    case DType::f32:
      return {1e-6, 1e-7};  // ~8 ulps of float: libm differences only
    case DType::f64:
      return {1e-12, 1e-14};
    case DType::f16:
      return {1e-3, 1e-5};  // half an ulp is 2^-11 = 4.9e-4
    case DType::bf16:
      return {4e-3, 1e-4};  // half an ulp is 2^-9 = 2e-3
    default:
      return {0, 0};  // integers and bool are exact
  }
}

inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::f64:
      return 1.1e-16;
    case DType::f16:
      return 4.9e-4;
    case DType::bf16:
      return 3.9e-3;
    default:
      return 6e-8;
  }
}

inline ::testing::AssertionResult close(const Tensor& got, const Arr& want, DType want_dtype,
                                        Tol tol, const Arr* scale = nullptr, double srel = 0) {
  if (!got.defined()) return ::testing::AssertionFailure() << "result is undefined";
  if (got.shape() != want.shape)
    return ::testing::AssertionFailure()
           << "shape " << show(got.shape()) << ", expected " << show(want.shape);
  if (got.dtype() != want_dtype)
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got.dtype()) << ", expected " << dtype_name(want_dtype);
  Arr g = read(got);
  int bad = 0;
  std::ostringstream msg;
  double worst = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double x = g.v[i], y = want.v[i];
    bool ok;
    if (std::isnan(y) || std::isnan(x)) {
      ok = std::isnan(x) && std::isnan(y);
    } else if (std::isinf(y) || std::isinf(x)) {
      ok = x == y;
    } else {
      double lim = tol.atol + tol.rtol * std::fabs(y) + (scale ? srel * scale->v[i] : 0.0);
      ok = std::fabs(x - y) <= lim;
      if (!ok) worst = std::max(worst, std::fabs(x - y));
    }
    if (!ok && ++bad <= 5)
      msg << "\n  at " << show(unravel(i, g.shape)) << ": got " << x << ", expected " << y;
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << g.numel() << " elements differ (shape " << show(g.shape)
           << ", worst abs error " << worst << ")" << msg.str();
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult close(const Tensor& got, const Arr& want, DType want_dtype) {
  return close(got, want, want_dtype, pointwise_tol(want_dtype));
}

// Runs fn on an input with a zero-size dim: it must either give `shape` or raise zc::Error;
// anything else (another exception, a wrong shape) fails, and a crash ends the test binary.
template <class F>
::testing::AssertionResult works_or_throws(F fn, const Shape& shape) {
  try {
    Tensor r = fn();
    if (r.shape() != shape)
      return ::testing::AssertionFailure()
             << "shape " << show(r.shape()) << ", expected " << show(shape);
  } catch (const Error&) {
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-zc exception: " << e.what();
  }
  return ::testing::AssertionSuccess();
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v{DType::f32, DType::f64, DType::f16, DType::bf16};
  return v;
}

}  // namespace zc::ref
