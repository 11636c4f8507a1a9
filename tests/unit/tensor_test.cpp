// The tensor runtime: factories, the seeded generator, views and their storage sharing, dtype
// conversions (checked bit for bit against an independent f16/bf16 codec) and the accessors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "unit/reference.h"
#include "zc/cuda.h"
#include "zc/device.h"
#include "zc/dtype.h"
#include "zc/error.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace {

using zc::DType;
using zc::Shape;
using zc::Tensor;
using zc::ref::Arr;
using zc::ref::read;

const std::vector<DType> kAllDTypes{DType::f32, DType::f64, DType::f16,    DType::bf16,
                                    DType::i64, DType::i32, DType::boolean};

std::vector<double> values(const Tensor& t) {
  return read(t).v;
}

// Whether two tensors alias: writing through one is visible in the other.
bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.unsafe_impl()->storage == b.unsafe_impl()->storage;
}

// [0, 1, 2, ...] as f32, built without the library's ops.
Tensor iota_f32(const Shape& shape) {
  Arr a{shape, std::vector<double>(zc::ref::numel_of(shape))};
  for (size_t i = 0; i < a.v.size(); ++i) a.v[i] = static_cast<double>(i);
  return zc::ref::make(a, DType::f32);
}

// ----------------------------------------------------------------------------------------------
// Factories

TEST(TensorFactories, ConstantFillsEveryDType) {
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(std::string(zc::dtype_name(t)));
    Tensor z = zc::zeros({2, 3}, t), o = zc::ones({4}, t), f = zc::full({3, 1, 2}, 3.0, t);
    EXPECT_EQ(z.shape(), (Shape{2, 3}));
    EXPECT_EQ(zc::dtype_name(z.dtype()), zc::dtype_name(t));
    EXPECT_TRUE(z.is_contiguous());
    EXPECT_EQ(values(z), std::vector<double>(6, 0.0));
    EXPECT_EQ(values(o), std::vector<double>(4, 1.0));
    // bool stores "nonzero": 3 becomes true.
    EXPECT_EQ(values(f), std::vector<double>(6, t == DType::boolean ? 1.0 : 3.0));
  }
  EXPECT_EQ(zc::zeros({}).dim(), 0);
  EXPECT_EQ(zc::zeros({}).numel(), 1);
  EXPECT_EQ(zc::zeros({0, 3}).numel(), 0);
  EXPECT_EQ(zc::dtype_name(zc::zeros({2, 3}).dtype()),
            zc::dtype_name(DType::f32));  // the default dtype
  EXPECT_EQ(values(zc::full({2}, -2.5, DType::f16)), (std::vector<double>{-2.5, -2.5}));
  // On the CPU, zeros made "on a device" are the plain factory's.
  const Tensor on_cpu = zc::zeros({2, 2}, DType::i32, zc::Device::cpu());
  EXPECT_EQ(on_cpu.device(), zc::Device::cpu());
  EXPECT_EQ(values(on_cpu), std::vector<double>(4, 0.0));
  EXPECT_THROW(zc::zeros({-1}, DType::f32, zc::Device::cpu()), zc::Error);
}

TEST(TensorFactories, Arange) {
  Tensor a = zc::arange(5);
  EXPECT_EQ(zc::dtype_name(a.dtype()), zc::dtype_name(DType::i64));
  EXPECT_EQ(values(a), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(values(zc::arange(0.5, 2.0, 0.5)), (std::vector<double>{0.5, 1.0, 1.5}));
  EXPECT_EQ(zc::dtype_name(zc::arange(0.5, 2.0, 0.5).dtype()), zc::dtype_name(DType::f32));
  // ceil((end - start) / step) elements, as numpy and torch.
  EXPECT_EQ(zc::arange(0.0, 1.0, 0.1).numel(), 10);
  EXPECT_EQ(values(zc::arange(3.0, 0.0, -1.0)), (std::vector<double>{3, 2, 1}));
  EXPECT_EQ(zc::arange(0).numel(), 0);
  EXPECT_EQ(zc::dtype_name(zc::arange(4, DType::i32).dtype()), zc::dtype_name(DType::i32));
}

TEST(TensorFactories, FromVectorAndFromValues) {
  Tensor v = zc::from_vector({1.5f, -2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  EXPECT_EQ(zc::dtype_name(v.dtype()), zc::dtype_name(DType::f32));
  EXPECT_EQ(values(v), (std::vector<double>{1.5, -2, 3, 4, 5, 6}));
  EXPECT_EQ(v.data<float>()[1], -2.f);

  EXPECT_EQ(zc::from_values<double>({0.1, 0.2}, {2}).data<double>()[0], 0.1);
  EXPECT_EQ(zc::from_values<int64_t>({int64_t{1} << 40}, {1}).data<int64_t>()[0], int64_t{1} << 40);
  EXPECT_EQ(values(zc::from_values<int32_t>({-7, 9}, {2, 1})), (std::vector<double>{-7, 9}));
  Tensor b = zc::from_values<bool>({true, false, true}, {3});
  EXPECT_EQ(zc::dtype_name(b.dtype()), zc::dtype_name(DType::boolean));
  EXPECT_EQ(values(b), (std::vector<double>{1, 0, 1}));
  Tensor h = zc::from_values<zc::Half>({zc::Half(0.5f), zc::Half(-3.f)}, {2});
  EXPECT_EQ(zc::dtype_name(h.dtype()), zc::dtype_name(DType::f16));
  EXPECT_EQ(values(h), (std::vector<double>{0.5, -3}));
  Tensor bf = zc::from_values<zc::BFloat16>({zc::BFloat16(1.f)}, {});
  EXPECT_EQ(zc::dtype_name(bf.dtype()), zc::dtype_name(DType::bf16));
  EXPECT_EQ(bf.dim(), 0);
  EXPECT_EQ(bf.item<float>(), 1.f);

  EXPECT_THROW(zc::from_vector({1.f, 2.f, 3.f}, {2, 2}), zc::Error);
  EXPECT_THROW(zc::from_vector({}, {-1}), zc::Error);
}

TEST(TensorFactories, ScalarTensor) {
  Tensor s = zc::scalar_tensor(2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(zc::dtype_name(s.dtype()), zc::dtype_name(DType::f32));
  EXPECT_EQ(s.item<double>(), 2.5);
  EXPECT_EQ(zc::scalar_tensor(7, DType::i32).item<int>(), 7);
}

TEST(TensorRandom, SameSeedSameNumbersDifferentSeedDifferent) {
  zc::manual_seed(1234);
  auto a = values(zc::randn({1000}));
  auto u = values(zc::rand({10}));
  zc::manual_seed(1234);
  EXPECT_EQ(values(zc::randn({1000})), a);
  EXPECT_EQ(values(zc::rand({10})), u);  // the whole sequence replays, not just the first call
  zc::manual_seed(1235);
  EXPECT_NE(values(zc::randn({1000})), a);
  // Successive calls continue the sequence rather than restarting it.
  zc::manual_seed(1234);
  zc::randn({1000});
  EXPECT_NE(values(zc::randn({1000})), a);
}

TEST(TensorRandom, RandnIsStandardNormal) {
  zc::manual_seed(7);
  const int64_t n = 100000;
  auto v = values(zc::randn({n}));
  double m = 0, s2 = 0;
  for (double x : v) m += x;
  m /= n;
  for (double x : v) s2 += (x - m) * (x - m);
  const double sd = std::sqrt(s2 / (n - 1));
  // The standard error of the mean is 1/sqrt(n) = 0.0032 and of the std about 0.0022; five of
  // them keeps the test from flaking while still catching a wrong distribution.
  EXPECT_NEAR(m, 0.0, 0.016);
  EXPECT_NEAR(sd, 1.0, 0.011);
  int within1 = 0;  // 68.27% of a normal lies within one sd
  for (double x : v) within1 += std::fabs(x) < 1;
  EXPECT_NEAR(within1 / static_cast<double>(n), 0.6827, 0.01);
  EXPECT_EQ(zc::dtype_name(zc::randn({3}, DType::f64).dtype()), zc::dtype_name(DType::f64));
  EXPECT_EQ(zc::dtype_name(zc::randn({3}, DType::bf16).dtype()), zc::dtype_name(DType::bf16));
}

TEST(TensorRandom, RandAndRandintRanges) {
  zc::manual_seed(3);
  auto u = values(zc::rand({50000}));
  double m = 0;
  for (double x : u) {
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    m += x;
  }
  EXPECT_NEAR(m / u.size(), 0.5, 0.01);  // sd of the mean is 0.0013

  Tensor r = zc::randint(-3, 4, {5000});
  EXPECT_EQ(zc::dtype_name(r.dtype()), zc::dtype_name(DType::i64));
  std::vector<int> count(7, 0);
  for (double x : values(r)) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ASSERT_EQ(x, std::floor(x));
    ++count[static_cast<int>(x) + 3];
  }
  for (int c : count) EXPECT_GT(c, 500);  // every value of [low, high) comes up (~714 each)
  EXPECT_EQ(zc::dtype_name(zc::randint(0, 10, {3}, DType::i32).dtype()),
            zc::dtype_name(DType::i32));
}

// ----------------------------------------------------------------------------------------------
// Views share storage: a write through the base's data pointer shows in the view.

TEST(TensorViews, ReshapeOfContiguousIsAView) {
  Tensor base = iota_f32({2, 3, 4});
  Tensor v = base.reshape({6, 4});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_TRUE(shares_storage(base, v));
  base.data<float>()[13] = -1;
  EXPECT_EQ(read(v).v[13], -1);
  EXPECT_EQ(base.reshape({-1}).shape(), (Shape{24}));
  EXPECT_EQ(base.reshape({4, -1}).shape(), (Shape{4, 6}));
  EXPECT_EQ(base.view({3, 8}).shape(), (Shape{3, 8}));
}

TEST(TensorViews, TransposeAndPermute) {
  Tensor base = iota_f32({2, 3, 4});
  Tensor t = base.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(shares_storage(base, t));
  Arr tv = read(t);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k) EXPECT_EQ(tv.v[(i * 3 + j) * 2 + k], k * 12 + j * 4 + i);

  Tensor p = base.permute({1, 2, 0});
  EXPECT_EQ(p.shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(p.strides(), (Shape{4, 1, 12}));
  EXPECT_EQ(base.permute({-1, 0, 1}).shape(), (Shape{4, 2, 3}));
  base.data<float>()[1 * 12 + 2 * 4 + 3] = 100;
  EXPECT_EQ(read(p).v[(2 * 4 + 3) * 2 + 1], 100);
  EXPECT_EQ(read(t).v[(3 * 3 + 2) * 2 + 1], 100);

  Tensor m = iota_f32({3, 5});
  EXPECT_EQ(m.t().shape(), (Shape{5, 3}));
  EXPECT_EQ(m.transpose(-1, -2).strides(), (Shape{1, 5}));
}

TEST(TensorViews, NarrowSliceSelect) {
  Tensor base = iota_f32({4, 6});
  Tensor n = base.narrow(1, 2, 3);
  EXPECT_EQ(n.shape(), (Shape{4, 3}));
  EXPECT_EQ(n.storage_offset(), 2);
  EXPECT_EQ(static_cast<char*>(n.raw_data()) - static_cast<char*>(base.raw_data()), 8);
  EXPECT_EQ(read(n).v, (std::vector<double>{2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22}));

  Tensor s = base.slice(1, 1, 6, 2);  // columns 1, 3, 5
  EXPECT_EQ(s.shape(), (Shape{4, 3}));
  EXPECT_EQ(s.strides(), (Shape{6, 2}));
  EXPECT_EQ(read(s).v[0], 1);
  EXPECT_EQ(read(s).v[5], 11);
  EXPECT_EQ(base.slice(0, 1, 100).shape(), (Shape{3, 6}));  // end clamps to the size
  EXPECT_EQ(base.slice(0, 0, 4, 3).shape(), (Shape{2, 6}));

  Tensor sel = base.select(0, 2);
  EXPECT_EQ(sel.shape(), (Shape{6}));
  EXPECT_EQ(read(sel).v[0], 12);
  Tensor col = base.select(1, 4);
  EXPECT_EQ(read(col).v, (std::vector<double>{4, 10, 16, 22}));

  base.data<float>()[2 * 6 + 3] = -5;  // row 2, column 3
  EXPECT_EQ(read(n).v[2 * 3 + 1], -5);
  EXPECT_EQ(read(s).v[2 * 3 + 1], -5);
  EXPECT_EQ(read(sel).v[3], -5);
  EXPECT_TRUE(shares_storage(base, s));
}

TEST(TensorViews, ExpandSqueezeUnsqueezeFlatten) {
  Tensor base = iota_f32({3, 1});
  Tensor e = base.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides()[0], 0);
  EXPECT_EQ(e.strides()[2], 0);
  EXPECT_EQ(base.expand({-1, 5}).shape(), (Shape{3, 5}));
  base.data<float>()[1] = 9;
  Arr ev = read(e);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(ev.v[(i * 3 + 1) * 4 + k], 9);

  Tensor x = iota_f32({1, 3, 1, 2});
  EXPECT_EQ(x.squeeze().shape(), (Shape{3, 2}));
  EXPECT_EQ(x.squeeze(2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(x.squeeze(-2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 1, 3, 1, 2}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{1, 3, 1, 2, 1}));
  EXPECT_EQ(x.unsqueeze(4).shape(), (Shape{1, 3, 1, 2, 1}));
  Tensor y = iota_f32({2, 3, 4});
  EXPECT_EQ(y.flatten().shape(), (Shape{24}));
  EXPECT_EQ(y.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(y.flatten(0, 1).shape(), (Shape{6, 4}));
  Tensor sq = x.squeeze(), us = x.unsqueeze(1), fl = y.flatten(1);
  x.data<float>()[5] = 50;
  y.data<float>()[17] = 70;
  EXPECT_EQ(read(sq).v[5], 50);
  EXPECT_EQ(read(us).v[5], 50);
  EXPECT_EQ(read(fl).v[17], 70);
}

TEST(TensorViews, ViewOfNonViewableLayoutThrowsReshapeCopies) {
  Tensor base = iota_f32({3, 4});
  Tensor t = base.t();
  EXPECT_THROW(t.view({12}), zc::Error);
  Tensor r = t.reshape({12});
  EXPECT_EQ(r.shape(), (Shape{12}));
  EXPECT_EQ(read(r).v, (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_TRUE(r.is_contiguous());
  base.data<float>()[0] = 42;  // the copy does not alias the base
  EXPECT_EQ(read(r).v[0], 0);
  // Splitting a dim of a transposed tensor keeps it viewable.
  EXPECT_EQ(t.view({2, 2, 3}).strides(), (Shape{2, 1, 4}));
  EXPECT_THROW(base.narrow(1, 0, 3).view({9}), zc::Error);  // rows have a gap between them
  // Every other column of every row is a uniform stride: viewable.
  EXPECT_EQ(base.slice(1, 0, 4, 2).view({6}).strides(), (Shape{2}));
}

TEST(TensorViews, ContiguousAndClone) {
  Tensor base = iota_f32({3, 4});
  Tensor c = base.permute({1, 0}).contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (Shape{3, 1}));
  EXPECT_EQ(read(c).v, read(base.t()).v);
  EXPECT_EQ(read(base.contiguous()).v, read(base).v);
  Tensor cl = base.clone();
  EXPECT_FALSE(shares_storage(base, cl));
  base.data<float>()[3] = -3;
  EXPECT_EQ(read(cl).v[3], 3);
  // A strided layout we build ourselves comes out packed with the same values.
  Arr a = zc::ref::uniform({3, 2, 5}, -1, 1);
  for (auto l : {zc::ref::Layout::column_major, zc::ref::Layout::strided}) {
    Tensor x = zc::ref::make(a, DType::f64, l);
    EXPECT_FALSE(x.is_contiguous());
    Tensor y = x.contiguous();
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_EQ(read(y).v, a.v);
  }
}

TEST(TensorViews, SizeStrideNumelAndShapeHelpers) {
  Tensor x = iota_f32({2, 3, 4});
  EXPECT_EQ(x.size(-1), 4);
  EXPECT_EQ(x.size(0), 2);
  EXPECT_EQ(x.stride(-2), 4);
  EXPECT_EQ(x.numel(), 24);
  EXPECT_EQ(zc::shape_str({2, 3}), "[2,3]");
  EXPECT_EQ(zc::shape_str({}), "[]");
  EXPECT_EQ(zc::contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(zc::shape_numel({2, 0, 4}), 0);
  EXPECT_EQ(zc::shape_numel({}), 1);
  // The CPU allocator promises 64-byte alignment.
  for (int64_t n : {1, 3, 17, 1000})
    EXPECT_EQ(reinterpret_cast<uintptr_t>(Tensor::empty({n}).raw_data()) % 64, 0u);
}

// ----------------------------------------------------------------------------------------------
// Conversions and accessors

TEST(TensorConvert, RoundTripsEveryDTypePair) {
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      SCOPED_TRACE(std::string(zc::dtype_name(a)) + " -> " + std::string(zc::dtype_name(b)));
      // Values that every type involved stores exactly.
      bool has_bool = a == DType::boolean || b == DType::boolean;
      Arr src{{2, 3},
              has_bool ? std::vector<double>{0, 1, 1, 0, 1, 0}
                       : std::vector<double>{0, 1, -2, 7, 100, -128}};
      Tensor x = zc::ref::make(src, a, zc::ref::Layout::column_major);
      Tensor y = x.to(b);
      EXPECT_EQ(zc::dtype_name(y.dtype()), zc::dtype_name(b));
      EXPECT_EQ(read(y).v, src.v);
      EXPECT_EQ(read(y.to(a)).v, src.v);
    }
  }
}

TEST(TensorConvert, RoundingOfEveryConversion) {
  zc::manual_seed(11);
  Arr a = zc::ref::uniform({257}, -300, 300);
  a.v.insert(a.v.end(), {2.5, -2.5, 0.5, -0.7, 1e-3, 65504, 70000, 1e-7});
  a.shape = {static_cast<int64_t>(a.v.size())};
  Tensor x = zc::ref::make(a, DType::f64);
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(std::string(zc::dtype_name(t)));
    if (t == DType::f64) continue;
    // f16/bf16 round to nearest even from float; integers truncate; bool is "nonzero".
    Arr want = zc::ref::map(a, [t](double v) { return zc::ref::round_to(v, t); });
    EXPECT_TRUE(zc::ref::close(x.to(t), want, t, {0, 0}));
  }
  // A value that is exact in f16 but not in bf16.
  Tensor y = zc::from_vector({1.0f + 1.0f / 1024}, {1});
  EXPECT_EQ(y.to(DType::f16).item<double>(), 1.0 + 1.0 / 1024);
  EXPECT_EQ(y.to(DType::bf16).item<double>(), 1.0);
}

TEST(TensorConvert, HalfSpecialValuesAndRounding) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(zc::Half(0.f).bits, 0x0000);
  EXPECT_EQ(zc::Half(-0.f).bits, 0x8000);
  EXPECT_EQ(zc::Half(1.f).bits, 0x3c00);
  EXPECT_EQ(zc::Half(65504.f).bits, 0x7bff);  // the largest finite
  EXPECT_EQ(zc::Half(65519.f).bits, 0x7bff);  // below the halfway point to 2^16
  EXPECT_EQ(zc::Half(65520.f).bits, 0x7c00);  // halfway rounds to even: inf
  EXPECT_EQ(zc::Half(inf).bits, 0x7c00);
  EXPECT_EQ(zc::Half(-inf).bits, 0xfc00);
  EXPECT_TRUE(std::isnan(static_cast<float>(zc::Half(std::nanf("")))));
  EXPECT_EQ(zc::Half(std::ldexp(1.f, -24)).bits, 0x0001);  // the smallest subnormal
  EXPECT_EQ(zc::Half(std::ldexp(1.f, -25)).bits, 0x0000);  // a tie rounds to even (zero)
  EXPECT_EQ(zc::Half(std::ldexp(3.f, -26)).bits, 0x0001);
  EXPECT_EQ(zc::Half(std::ldexp(3.f, -25)).bits, 0x0002);        // 1.5 ulps: tie to even (2)
  EXPECT_EQ(zc::Half(std::ldexp(1.f, -14)).bits, 0x0400);        // the smallest normal
  EXPECT_EQ(zc::Half(1.f + std::ldexp(1.f, -11)).bits, 0x3c00);  // tie: to even
  EXPECT_EQ(zc::Half(1.f + std::ldexp(3.f, -11)).bits, 0x3c02);  // tie: to even (up)
}

TEST(TensorConvert, HalfAndBFloat16AgreeWithAnIndependentCodec) {
  // Every bit pattern decodes to what the IEEE layout says, and re-encodes to itself.
  for (uint32_t b = 0; b < 65536; ++b) {
    zc::Half h;
    h.bits = static_cast<uint16_t>(b);
    zc::BFloat16 bf;
    bf.bits = static_cast<uint16_t>(b);
    const double hv = zc::ref::half_value(h.bits), bv = zc::ref::bf16_value(bf.bits);
    if (std::isnan(hv)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(h))) << b;
    } else {
      ASSERT_EQ(static_cast<float>(h), hv) << b;
      ASSERT_EQ(zc::Half(static_cast<float>(h)).bits, h.bits) << b;
    }
    if (std::isnan(bv)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(bf))) << b;
    } else {
      ASSERT_EQ(static_cast<float>(bf), bv) << b;
      ASSERT_EQ(zc::BFloat16(static_cast<float>(bf)).bits, bf.bits) << b;
    }
  }
  // Random floats over the whole exponent range round exactly as round-to-nearest-even says.
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = any(rng);
    if (i % 2) u = (u & 0x807fffffu) | ((100 + u % 50) << 23);  // dense near f16's range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(zc::Half(f).bits, zc::ref::half_bits(f)) << f;
    ASSERT_EQ(zc::BFloat16(f).bits, zc::ref::bf16_bits(f)) << f;
  }
}

TEST(TensorConvert, BFloat16SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(zc::BFloat16(1.f).bits, 0x3f80);
  EXPECT_EQ(zc::BFloat16(-0.f).bits, 0x8000);
  EXPECT_EQ(zc::BFloat16(inf).bits, 0x7f80);
  EXPECT_TRUE(std::isnan(static_cast<float>(zc::BFloat16(std::nanf("")))));
  EXPECT_EQ(zc::BFloat16(1.f + std::ldexp(1.f, -8)).bits, 0x3f80);          // tie: to even
  EXPECT_EQ(zc::BFloat16(1.f + std::ldexp(3.f, -8)).bits, 0x3f82);          // tie: to even (up)
  EXPECT_EQ(zc::BFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // overflows
  EXPECT_EQ(zc::BFloat16(std::ldexp(1.f, -133)).bits, 0x0001);              // subnormal
}

TEST(TensorAccess, ItemAndData) {
  EXPECT_EQ(zc::scalar_tensor(3.75).item<float>(), 3.75f);
  EXPECT_EQ(zc::full({1, 1}, -2, DType::i64).item<int64_t>(), -2);
  EXPECT_EQ(zc::full({1}, 1, DType::boolean).item<bool>(), true);
  EXPECT_EQ(zc::full({}, 0.5, DType::bf16).item<double>(), 0.5);
  // item() of a view reads the element the view points at.
  EXPECT_EQ(iota_f32({3, 4}).select(0, 2).narrow(0, 1, 1).item<float>(), 9.f);

  Tensor x = zc::zeros({2}, DType::f64);
  EXPECT_NO_THROW(x.data<double>());
  EXPECT_THROW(x.data<float>(), zc::Error);
  EXPECT_THROW(zc::zeros({2}, DType::i32).data<int64_t>(), zc::Error);
  EXPECT_THROW(zc::zeros({2}, DType::f16).data<zc::BFloat16>(), zc::Error);
  EXPECT_THROW(zc::zeros({2}).item<float>(), zc::Error);
  EXPECT_THROW(zc::zeros({0}).item<float>(), zc::Error);
}

TEST(TensorAccess, StrMentionsShapeAndDType) {
  std::string s = zc::zeros({2, 3}).str();
  EXPECT_NE(s.find("[2,3]"), std::string::npos) << s;
  EXPECT_NE(s.find("f32"), std::string::npos) << s;
  std::string b = zc::zeros({4}, DType::boolean).str();
  EXPECT_NE(b.find("bool"), std::string::npos) << b;
  EXPECT_NE(zc::zeros({1000, 1000}).str().find("[1000,1000]"), std::string::npos);
  EXPECT_NO_THROW(Tensor().str());
}

TEST(TensorDevice, CudaIsRepresentableButRefusedWithoutAGpu) {
  EXPECT_EQ(zc::Device::cpu().str(), "cpu");
  EXPECT_EQ(zc::Device::cuda(1).str(), "cuda:1");
  EXPECT_TRUE(zc::Device::cuda().is_cuda());
  EXPECT_EQ(zc::zeros({2}).device(), zc::Device::cpu());
  EXPECT_NO_THROW(zc::zeros({2}).to(zc::Device::cpu()));
  if (zc::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present (CudaRuntimeGpu)";
  try {
    zc::zeros({2}).to(zc::Device::cuda());
    FAIL() << "to(cuda) did not throw";
  } catch (const zc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(TensorDType, NamesSizesAndPromotion) {
  EXPECT_EQ(zc::dtype_name(DType::f32), "f32");
  EXPECT_EQ(zc::dtype_name(DType::boolean), "bool");
  EXPECT_EQ(zc::dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(zc::dtype_size(DType::f64), 8u);
  EXPECT_EQ(zc::dtype_size(DType::bf16), 2u);
  EXPECT_EQ(zc::dtype_size(DType::boolean), 1u);
  EXPECT_EQ(zc::dtype_size(DType::i32), 4u);
  EXPECT_TRUE(zc::is_floating(DType::f16));
  EXPECT_FALSE(zc::is_floating(DType::i64));
  EXPECT_TRUE(zc::is_integral(DType::i32));
  EXPECT_FALSE(zc::is_integral(DType::boolean));
  struct Case {
    DType a, b, want;
  };
  for (auto c : std::vector<Case>{{DType::f32, DType::f64, DType::f64},
                                  {DType::i32, DType::f32, DType::f32},
                                  {DType::i64, DType::f16, DType::f16},
                                  {DType::f16, DType::bf16, DType::f32},
                                  {DType::f16, DType::f32, DType::f32},
                                  {DType::bf16, DType::f64, DType::f64},
                                  {DType::i32, DType::i64, DType::i64},
                                  {DType::boolean, DType::i32, DType::i32},
                                  {DType::boolean, DType::bf16, DType::bf16},
                                  {DType::boolean, DType::boolean, DType::boolean}}) {
    EXPECT_EQ(zc::dtype_name(zc::promote_types(c.a, c.b)), zc::dtype_name(c.want))
        << zc::dtype_name(c.a) << " with " << zc::dtype_name(c.b);
    EXPECT_EQ(zc::dtype_name(zc::promote_types(c.b, c.a)), zc::dtype_name(c.want))
        << "not symmetric";
  }
}

}  // namespace
