// Typed op attributes. Each op takes exactly one alternative of Attrs (named in its OpDef);
// values are normalized by the front end before dispatch (dims non-negative and sorted,
// shapes without -1, optional scale resolved), so two calls that mean the same thing carry
// equal attributes: that is what lets a captured graph hash the same way twice.
//
// Each struct lists its fields once, in fields() (Field, Flag, IntList, Packed): their printed
// form, their canonical bytes and the reading of those bytes follow from that list, in its order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "ops/attr_fields.h"
#include "zc/dtype.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace zc {
class ByteWriter;
class ByteReader;
}  // namespace zc

namespace zc::ops {

struct NoAttrs {
  bool operator==(const NoAttrs&) const = default;
  static auto fields(auto&) { return std::tuple{}; }
};
struct GeluAttrs {
  GeluApprox approximate = GeluApprox::none;
  bool operator==(const GeluAttrs&) const = default;
  static auto fields(auto& a) { return std::tuple{field("approximate", a.approximate)}; }
};
struct CastAttrs {
  DType dtype = DType::f32;
  bool operator==(const CastAttrs&) const = default;
  static auto fields(auto& a) { return std::tuple{field("dtype", a.dtype)}; }
};
struct ClampAttrs {
  std::optional<double> min, max;
  bool operator==(const ClampAttrs&) const = default;
  static auto fields(auto& a) { return std::tuple{field("min", a.min), field("max", a.max)}; }
};
struct ReduceAttrs {
  std::vector<int64_t> dims;  // sorted, unique, non-negative; never empty (all dims listed)
  bool keepdim = false;
  int64_t correction = 0;  // var only
  bool operator==(const ReduceAttrs&) const = default;
  static auto fields(auto& a) {
    return std::tuple{field("dims", a.dims), field("keepdim", a.keepdim),
                      field("correction", a.correction)};
  }
};
struct ShapeAttrs {
  Shape shape;  // reshape and expand target, fully resolved
  bool operator==(const ShapeAttrs&) const = default;
  static auto fields(auto& a) { return std::tuple{field("shape", a.shape)}; }
};
struct PermuteAttrs {
  std::vector<int64_t> dims;
  bool operator==(const PermuteAttrs&) const = default;
  static auto fields(auto& a) { return std::tuple{field("dims", a.dims)}; }
};
struct SliceAttrs {
  int64_t dim = 0, start = 0, end = 0, step = 1;  // clamped to the dim's size, step >= 1
  bool operator==(const SliceAttrs&) const = default;
  static auto fields(auto& a) {
    return std::tuple{field("dim", a.dim), field("start", a.start), field("end", a.end),
                      field("step", a.step)};
  }
};
struct DimAttrs {
  int64_t dim = 0;  // non-negative
  bool operator==(const DimAttrs&) const = default;
  static auto fields(auto& a) { return std::tuple{field("dim", a.dim)}; }
};
struct LayerNormAttrs {
  int64_t normalized_ndim = 1;
  double eps = 1e-5;
  bool has_weight = false, has_bias = false;
  bool operator==(const LayerNormAttrs&) const = default;
  static auto fields(auto& a) {
    return std::tuple{field("normalized_ndim", a.normalized_ndim), field("eps", a.eps),
                      field("weight", a.has_weight), field("bias", a.has_bias)};
  }
};
struct AttentionAttrs {
  bool causal = false;
  double scale = 1.0;
  bool operator==(const AttentionAttrs&) const = default;
  static auto fields(auto& a) {
    return std::tuple{field("causal", a.causal), field("scale", a.scale)};
  }
};
// Which gradient attention_grad computes: of q, k or v, or of k and v together (one output,
// dk's columns then dv's, so that one kernel computes both from the probabilities it forms once).
enum class AttentionWrt : uint8_t { q, k, v, kv };
struct AttentionGradAttrs {
  bool causal = false;
  double scale = 1.0;
  AttentionWrt wrt = AttentionWrt::q;
  bool operator==(const AttentionGradAttrs&) const = default;
  static auto fields(auto& a) {
    return std::tuple{field("causal", a.causal), field("scale", a.scale), field("wrt", a.wrt)};
  }
};

// conv2d over [N, C, H, W] with a weight [C_out, C / groups, kh, kw]: strides, zero padding on
// each side (top, left, bottom, right: ONNX's pads may differ per side), dilations, groups.
struct Conv2dAttrs {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  // A fused epilogue, set only by the conv passes (lower/channels_last.h) for a backend whose
  // convolution computes it: a last input of the output's shape added (a residual), then a ReLU
  // or a ReLU6 (min(max(y, 0), 6): MobileNets' activation; oneDNN's only), never both.
  bool residual = false;
  bool relu = false;
  bool relu6 = false;
  bool operator==(const Conv2dAttrs&) const = default;
  // One list of integers in the bytes, the flags as 0 or 1: the layout stored graphs were
  // hashed with.
  static auto fields(auto& a) {
    return std::tuple{packed("conv2d", ints("stride", a.stride_h, a.stride_w),
                             ints("pads", a.pad_top, a.pad_left, a.pad_bottom, a.pad_right),
                             ints("dilation", a.dilation_h, a.dilation_w),
                             field("groups", a.groups), flag("residual", a.residual),
                             one_of("relu", a.relu, "relu6", a.relu6))};
  }
};
// max_pool2d and avg_pool2d over [N, C, H, W]. Padding counts as -inf for max and 0 for avg;
// ceil_mode rounds the output size up (a last window that starts inside the input or its left
// padding); count_include_pad (avg) divides by the window's size within the padded input,
// else by its size within the input. Dilation is max's only.
struct Pool2dAttrs {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;
  bool count_include_pad = true;
  // max_pool2d over [N, H, W, C] instead (the channels_last pass sets it; the others refuse it).
  bool channels_last = false;
  bool operator==(const Pool2dAttrs&) const = default;
  // The integers as one list in the bytes, the bools each a byte after it: the layout stored
  // graphs were hashed with.
  static auto fields(auto& a) {
    return std::tuple{packed("a 2-d pool", ints("kernel", a.kernel_h, a.kernel_w),
                             ints("stride", a.stride_h, a.stride_w),
                             ints("pads", a.pad_top, a.pad_left, a.pad_bottom, a.pad_right),
                             ints("dilation", a.dilation_h, a.dilation_w)),
                      field("ceil_mode", a.ceil_mode),
                      field("count_include_pad", a.count_include_pad),
                      flag("channels_last", a.channels_last)};
  }
};

using Attrs = std::variant<NoAttrs, GeluAttrs, CastAttrs, ClampAttrs, ReduceAttrs, ShapeAttrs,
                           PermuteAttrs, SliceAttrs, DimAttrs, LayerNormAttrs, AttentionAttrs,
                           AttentionGradAttrs, Conv2dAttrs, Pool2dAttrs>;

// What the printer, writer and reader need of an alternative: its field list, read-only and
// to fill in.
template <class A>
concept DeclaresFields = requires(A& a, const A& c) {
  A::fields(a);
  A::fields(c);
};
template <class V>
struct EveryAlternativeDeclaresFields;
template <class... A>
struct EveryAlternativeDeclaresFields<std::variant<A...>>
    : std::bool_constant<(DeclaresFields<A> && ...)> {};
static_assert(EveryAlternativeDeclaresFields<Attrs>::value,
              "an alternative of Attrs lacks its fields()");

// "q", "k", "v", "kv".
const char* attention_wrt_name(AttentionWrt w);

// Readable, stable form for printers and logs: "dims=[1], keepdim=true".
std::string attrs_str(const Attrs& attrs);

// Canonical bytes (the alternative's index, then every field in declaration order), and the
// inverse; read_attrs raises zc::Error on malformed bytes.
void write_attrs(ByteWriter& w, const Attrs& attrs);
Attrs read_attrs(ByteReader& r);

}  // namespace zc::ops
