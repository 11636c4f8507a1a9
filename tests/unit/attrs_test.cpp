// Op attributes as IR dumps print them and as graph hashes and cache keys read their canonical
// bytes: every alternative of Attrs, each field set away from its default, round-trips, prints
// as it always has and keeps its byte layout; malformed bytes are errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "ops/attrs.h"
#include "util/bytes.h"
#include "zc/error.h"

namespace zc {
namespace {

using ops::Attrs;

struct Sample {
  Attrs attrs;
  std::string printed;
};

// At least one of each alternative, every field away from its default in one of them.
const std::vector<Sample>& samples() {
  static const std::vector<Sample> v{
      {ops::NoAttrs{}, ""},
      {ops::GeluAttrs{GeluApprox::tanh}, "approximate=tanh"},
      {ops::GeluAttrs{GeluApprox::none}, "approximate=none"},
      {ops::CastAttrs{DType::bf16}, "dtype=bf16"},
      {ops::ClampAttrs{-0.5, std::nullopt}, "min=-0.5, max=none"},
      {ops::ClampAttrs{std::nullopt, 1.0 / 3}, "min=none, max=0.333333"},
      {ops::ReduceAttrs{{0, 2}, true, 1}, "dims=[0,2], keepdim=true, correction=1"},
      {ops::ShapeAttrs{{2, 3, 4}}, "shape=[2,3,4]"},
      {ops::PermuteAttrs{{2, 0, 1}}, "dims=[2,0,1]"},
      {ops::SliceAttrs{1, 2, 9, 3}, "dim=1, start=2, end=9, step=3"},
      {ops::DimAttrs{3}, "dim=3"},
      {ops::LayerNormAttrs{2, 1e-6, true, true},
       "normalized_ndim=2, eps=9.9999999999999995e-07, weight=true, bias=true"},
      {ops::AttentionAttrs{true, 0.125}, "causal=true, scale=0.125"},
      {ops::AttentionGradAttrs{true, 0.1, ops::AttentionWrt::kv},
       "causal=true, scale=0.10000000000000001, wrt=kv"},
      {ops::Conv2dAttrs{2, 3, 1, 2, 3, 4, 2, 1, 4, true, true},
       "stride=[2,3], pads=[1,2,3,4], dilation=[2,1], groups=4, residual, relu"},
      {ops::Conv2dAttrs{}, "stride=[1,1], pads=[0,0,0,0], dilation=[1,1], groups=1"},
      {ops::Conv2dAttrs{1, 1, 0, 0, 0, 0, 1, 1, 8, false, false, true},
       "stride=[1,1], pads=[0,0,0,0], dilation=[1,1], groups=8, relu6"},
      {ops::Pool2dAttrs{3, 2, 2, 1, 1, 0, 1, 0, 1, 2, true, false, true},
       "kernel=[3,2], stride=[2,1], pads=[1,0,1,0], dilation=[1,2], ceil_mode=true, "
       "count_include_pad=false, channels_last"},
      {ops::Pool2dAttrs{},
       "kernel=[1,1], stride=[1,1], pads=[0,0,0,0], dilation=[1,1], ceil_mode=false, "
       "count_include_pad=true"},
  };
  return v;
}

std::vector<uint8_t> bytes_of(const Attrs& a) {
  ByteWriter w;
  ops::write_attrs(w, a);
  return w.take();
}

TEST(Attrs, SamplesCoverEveryAlternative) {
  std::set<size_t> seen;
  for (const Sample& s : samples()) seen.insert(s.attrs.index());
  EXPECT_EQ(seen.size(), std::variant_size_v<Attrs>);
}

TEST(Attrs, EveryAlternativeRoundTrips) {
  for (const Sample& s : samples()) {
    SCOPED_TRACE(s.printed);
    const std::vector<uint8_t> bytes = bytes_of(s.attrs);
    ByteReader r(bytes, "attributes");
    EXPECT_EQ(ops::read_attrs(r), s.attrs);
    EXPECT_EQ(r.remaining(), 0u);
  }
}

TEST(Attrs, EveryAlternativePrintsItsStableForm) {
  for (const Sample& s : samples()) EXPECT_EQ(ops::attrs_str(s.attrs), s.printed);
}

// The layout written out by hand: graph hashes and cache keys are made of these bytes, so a
// change here would make every stored artifact unreachable.
TEST(Attrs, CanonicalBytesKeepTheirLayout) {
  for (const Sample& s : samples()) {
    SCOPED_TRACE(s.printed);
    ByteWriter w;
    w.u8(static_cast<uint8_t>(s.attrs.index()));
    std::visit(
        [&](const auto& a) {
          using A = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<A, ops::GeluAttrs>) {
            w.u8(static_cast<uint8_t>(a.approximate));
          } else if constexpr (std::is_same_v<A, ops::CastAttrs>) {
            w.u8(static_cast<uint8_t>(a.dtype));
          } else if constexpr (std::is_same_v<A, ops::ClampAttrs>) {
            for (const std::optional<double>& b : {a.min, a.max}) {
              w.u8(b.has_value());
              w.f64(b.value_or(0.0));
            }
          } else if constexpr (std::is_same_v<A, ops::ReduceAttrs>) {
            w.i64s(a.dims);
            w.u8(a.keepdim);
            w.i64(a.correction);
          } else if constexpr (std::is_same_v<A, ops::ShapeAttrs>) {
            w.i64s(a.shape);
          } else if constexpr (std::is_same_v<A, ops::PermuteAttrs>) {
            w.i64s(a.dims);
          } else if constexpr (std::is_same_v<A, ops::SliceAttrs>) {
            for (int64_t x : {a.dim, a.start, a.end, a.step}) w.i64(x);
          } else if constexpr (std::is_same_v<A, ops::DimAttrs>) {
            w.i64(a.dim);
          } else if constexpr (std::is_same_v<A, ops::LayerNormAttrs>) {
            w.i64(a.normalized_ndim);
            w.f64(a.eps);
            w.u8(a.has_weight);
            w.u8(a.has_bias);
          } else if constexpr (std::is_same_v<A, ops::AttentionAttrs>) {
            w.u8(a.causal);
            w.f64(a.scale);
          } else if constexpr (std::is_same_v<A, ops::AttentionGradAttrs>) {
            w.u8(a.causal);
            w.f64(a.scale);
            w.u8(static_cast<uint8_t>(a.wrt));
          } else if constexpr (std::is_same_v<A, ops::Conv2dAttrs>) {
            w.i64s(std::vector<int64_t>{a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.pad_bottom,
                                        a.pad_right, a.dilation_h, a.dilation_w, a.groups,
                                        a.residual,
                                        a.relu    ? 1
                                        : a.relu6 ? 2
                                                  : 0});
          } else if constexpr (std::is_same_v<A, ops::Pool2dAttrs>) {
            w.i64s(std::vector<int64_t>{a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.pad_top,
                                        a.pad_left, a.pad_bottom, a.pad_right, a.dilation_h,
                                        a.dilation_w});
            w.u8(a.ceil_mode);
            w.u8(a.count_include_pad);
            w.u8(a.channels_last);
          } else {
            static_assert(std::is_same_v<A, ops::NoAttrs>, "an alternative without a layout");
          }
        },
        s.attrs);
    EXPECT_EQ(bytes_of(s.attrs), w.bytes());
  }
}

// Bytes from `write`, read back: a zc::Error whose message contains `expected`.
void expect_malformed(void (*write)(ByteWriter&), const std::string& expected) {
  ByteWriter w;
  write(w);
  const std::vector<uint8_t> bytes = w.take();
  ByteReader r(bytes, "attributes");
  try {
    ops::read_attrs(r);
    ADD_FAILURE() << "read, expected an error containing " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

template <class A>
uint8_t index_of() {
  return static_cast<uint8_t>(Attrs(A{}).index());
}

TEST(Attrs, MalformedBytesAreErrors) {
  expect_malformed([](ByteWriter& w) { w.u8(std::variant_size_v<Attrs>); }, "unknown kind");
  expect_malformed(
      [](ByteWriter& w) {
        w.u8(index_of<ops::GeluAttrs>());
        w.u8(2);
      },
      "bad gelu approximation 2");
  expect_malformed(
      [](ByteWriter& w) {
        w.u8(index_of<ops::CastAttrs>());
        w.u8(kNumDTypes);
      },
      "bad dtype");
  expect_malformed(
      [](ByteWriter& w) {
        w.u8(index_of<ops::AttentionGradAttrs>());
        w.u8(0);
        w.f64(1.0);
        w.u8(4);
      },
      "bad attention gradient operand 4");
  expect_malformed(
      [](ByteWriter& w) {
        w.u8(index_of<ops::Conv2dAttrs>());
        w.i64s(std::vector<int64_t>(10, 1));
      },
      "conv2d needs 11 integers");
  expect_malformed(
      [](ByteWriter& w) {
        w.u8(index_of<ops::Conv2dAttrs>());
        std::vector<int64_t> v(11, 1);
        v.back() = 3;  // the epilogue's activation: 0 none, 1 relu, 2 relu6
        w.i64s(v);
      },
      "relu and its alternatives are stored as 0 to 2, got 3");
  expect_malformed(
      [](ByteWriter& w) {
        w.u8(index_of<ops::Pool2dAttrs>());
        w.i64s(std::vector<int64_t>(11, 1));
      },
      "a 2-d pool needs 10 integers");
  expect_malformed(
      [](ByteWriter& w) {
        w.u8(index_of<ops::SliceAttrs>());
        w.i64(0);
      },
      "truncated");
}

}  // namespace
}  // namespace zc
