// Checking cuBLASLt products on a GPU against a reference computed in double on the host from
// the very values the GPU multiplied (after rounding to the operands' dtype): each element of D
// within a tolerance relative to alpha * |A| @ |B| + |bias|, and every element of D's buffer
// outside the product untouched.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/blaslt.h"
#include "cuda/stream.h"
#include "cuda/tensors.h"
#include "zc/factories.h"
#include "zc/tensor.h"

namespace zc::test {

// The values of a tensor (any device), as doubles.
inline std::vector<double> values_of(const Tensor& t) {
  const Tensor d = t.to(Device::cpu()).to(DType::f64).contiguous();
  const double* p = d.data<double>();
  return std::vector<double>(p, p + d.numel());
}

// `count` elements of `dtype` on cuda:0 and, on the host, the values they hold.
struct GpuBuffer {
  DType dtype = DType::f32;
  Tensor dev;
  std::vector<double> host;
  CUdeviceptr at(int64_t element = 0) const {
    return cuda::device_address(dev) + static_cast<CUdeviceptr>(element) * dtype_size(dtype);
  }
  std::vector<double> read() const { return values_of(dev); }
};

inline GpuBuffer upload(const Tensor& t) {
  GpuBuffer b;
  b.dtype = t.dtype();
  b.dev = t.to(Device::cuda(0));
  b.host = values_of(t);
  return b;
}
inline GpuBuffer random_buffer(int64_t count, DType t) {
  return upload(randn({count}).to(t));
}
inline GpuBuffer filled_buffer(int64_t count, DType t, double value) {
  return upload(full({count}, value, t));
}

inline constexpr double kSentinel = -3.5;  // what D holds where the product must not write

// A product and where its operands sit: each pointer is moved `off_*` elements into its buffer
// (one element misaligns it).
struct GemmCase {
  cuda::GemmProblem p;
  int64_t off_a = 0, off_b = 0, off_d = 0, off_bias = 0;
};

// A dense row-major problem: A [M, K], B [K, N], D [M, N], each row stored right after the
// previous one.
inline cuda::GemmProblem dense_problem(DType t, int64_t m, int64_t n, int64_t k,
                                       bool trans_a = false, bool trans_b = false) {
  cuda::GemmProblem p;
  p.a = p.b = p.d = t;
  p.M = m;
  p.N = n;
  p.K = k;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.lda = trans_a ? m : k;
  p.ldb = trans_b ? k : n;
  p.ldd = n;
  return p;
}

inline bool has_bias(cuda::Epilogue e) {
  return e == cuda::Epilogue::bias || e == cuda::Epilogue::bias_relu;
}

// Elements an operand of `rows` stored rows of leading dimension `ld` spans over the batch (at
// least one: an operand K=0 leaves unread still has an address).
inline int64_t span(int64_t rows, int64_t ld, int64_t batch, int64_t stride) {
  return std::max<int64_t>(1, rows * ld + (batch - 1) * stride);
}

// The operands of a case, made and uploaded; D filled with kSentinel.
struct GemmOperands {
  GpuBuffer a, b, d, bias;
};
inline GemmOperands make_operands(const GemmCase& c) {
  const cuda::GemmProblem& p = c.p;
  GemmOperands o;
  o.a = random_buffer(c.off_a + span(p.trans_a ? p.K : p.M, p.lda, p.batch, p.stride_a), p.a);
  o.b = random_buffer(c.off_b + span(p.trans_b ? p.N : p.K, p.ldb, p.batch, p.stride_b), p.b);
  o.d = filled_buffer(c.off_d + span(p.M, p.ldd, p.batch, p.stride_d), p.d, kSentinel);
  if (has_bias(p.epilogue)) o.bias = random_buffer(c.off_bias + p.N, p.d);
  return o;
}

inline void run_case(const GemmCase& c, const GemmOperands& o, CUstream stream = nullptr) {
  cuda::gemm(c.p, o.a.at(c.off_a), o.b.at(c.off_b), o.d.at(c.off_d),
             has_bias(c.p.epilogue) ? o.bias.at(c.off_bias) : 0, 0,
             stream ? stream : cuda::current_stream(0));
}

// Compares D as read back (`got`, the whole buffer) with the reference; reports the first few
// elements out of bounds.
inline void expect_product(const GemmCase& c, const GemmOperands& o, const std::vector<double>& got,
                           double tol) {
  const cuda::GemmProblem& p = c.p;
  const std::string what = cuda::describe(p) + " (alpha " + std::to_string(p.alpha) + ", offsets " +
                           std::to_string(c.off_a) + "," + std::to_string(c.off_b) + "," +
                           std::to_string(c.off_d) + "," + std::to_string(c.off_bias) + ")";
  std::vector<bool> written(got.size(), false);
  // Rounding to D's dtype is off by up to half its spacing, which near zero (subnormals) is a
  // fixed absolute step, not relative to the magnitude.
  const double floor = p.d == DType::f16    ? std::ldexp(1.0, -24)
                       : p.d == DType::bf16 ? std::ldexp(1.0, -133)
                       : p.d == DType::f32  ? std::ldexp(1.0, -149)
                                            : 1e-300;
  std::vector<double> a(p.M * p.K), b(p.K * p.N), acc(p.N), mag(p.N);
  int bad = 0;
  for (int64_t bt = 0; bt < p.batch; ++bt) {
    const int64_t a0 = c.off_a + bt * p.stride_a, b0 = c.off_b + bt * p.stride_b;
    for (int64_t i = 0; i < p.M; ++i) {
      for (int64_t k = 0; k < p.K; ++k) {
        a[i * p.K + k] = o.a.host[a0 + (p.trans_a ? k * p.lda + i : i * p.lda + k)];
      }
    }
    for (int64_t k = 0; k < p.K; ++k) {
      for (int64_t j = 0; j < p.N; ++j) {
        b[k * p.N + j] = o.b.host[b0 + (p.trans_b ? j * p.ldb + k : k * p.ldb + j)];
      }
    }
    for (int64_t i = 0; i < p.M; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      for (int64_t k = 0; k < p.K; ++k) {
        const double aik = a[i * p.K + k];
        const double* brow = &b[k * p.N];
        for (int64_t j = 0; j < p.N; ++j) {
          acc[j] += aik * brow[j];
          mag[j] += std::fabs(aik * brow[j]);
        }
      }
      for (int64_t j = 0; j < p.N; ++j) {
        const double bias = has_bias(p.epilogue) ? o.bias.host[c.off_bias + j] : 0.0;
        double want = p.alpha * acc[j] + bias;
        if (p.epilogue == cuda::Epilogue::relu || p.epilogue == cuda::Epilogue::bias_relu) {
          want = std::max(want, 0.0);
        }
        const double bound = tol * (std::fabs(p.alpha) * mag[j] + std::fabs(bias)) + floor;
        const int64_t at = c.off_d + bt * p.stride_d + i * p.ldd + j;
        written[at] = true;
        if (!(std::fabs(got[at] - want) <= bound) && ++bad <= 5) {
          ADD_FAILURE() << what << ": D[" << bt << "][" << i << "][" << j << "] = " << got[at]
                        << ", expected " << want << " within " << bound;
        }
      }
    }
  }
  for (size_t at = 0; at < got.size(); ++at) {
    if (!written[at] && got[at] != o.d.host[at] && ++bad <= 5) {
      ADD_FAILURE() << what << ": element " << at << " of D's buffer, outside the product, was "
                    << "overwritten with " << got[at];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// Makes the operands, runs the case on the current stream and checks it.
inline void check_case(const GemmCase& c, double tol) {
  const GemmOperands o = make_operands(c);
  run_case(c, o);
  expect_product(c, o, o.d.read(), tol);
}

}  // namespace zc::test
