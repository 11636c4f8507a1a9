#include "ops/attrs.h"

#include <sstream>

namespace zc::ops {

namespace {
std::string list_str(const std::vector<int64_t>& v) {
  return shape_str(v);
}
std::string opt_str(const std::optional<double>& v) {
  if (!v) return "none";
  std::ostringstream os;
  os << *v;
  return os.str();
}
std::string num_str(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

struct Printer {
  std::string operator()(const NoAttrs&) const { return ""; }
  std::string operator()(const GeluAttrs& a) const {
    return a.approximate == GeluApprox::tanh ? "approximate=tanh" : "approximate=none";
  }
  std::string operator()(const CastAttrs& a) const {
    return "dtype=" + std::string(dtype_name(a.dtype));
  }
  std::string operator()(const ClampAttrs& a) const {
    return "min=" + opt_str(a.min) + ", max=" + opt_str(a.max);
  }
  std::string operator()(const ReduceAttrs& a) const {
    return "dims=" + list_str(a.dims) + ", keepdim=" + (a.keepdim ? "true" : "false") +
           ", correction=" + std::to_string(a.correction);
  }
  std::string operator()(const ShapeAttrs& a) const { return "shape=" + list_str(a.shape); }
  std::string operator()(const PermuteAttrs& a) const { return "dims=" + list_str(a.dims); }
  std::string operator()(const SliceAttrs& a) const {
    return "dim=" + std::to_string(a.dim) + ", start=" + std::to_string(a.start) +
           ", end=" + std::to_string(a.end) + ", step=" + std::to_string(a.step);
  }
  std::string operator()(const DimAttrs& a) const { return "dim=" + std::to_string(a.dim); }
  std::string operator()(const LayerNormAttrs& a) const {
    return "normalized_ndim=" + std::to_string(a.normalized_ndim) + ", eps=" + num_str(a.eps) +
           ", weight=" + (a.has_weight ? "true" : "false") +
           ", bias=" + (a.has_bias ? "true" : "false");
  }
  std::string operator()(const AttentionAttrs& a) const {
    return std::string("causal=") + (a.causal ? "true" : "false") + ", scale=" + num_str(a.scale);
  }
  std::string operator()(const AttentionGradAttrs& a) const {
    return std::string("causal=") + (a.causal ? "true" : "false") + ", scale=" + num_str(a.scale) +
           ", wrt=" + attention_wrt_name(a.wrt);
  }
  std::string operator()(const Conv2dAttrs& a) const {
    return "stride=" + list_str({a.stride_h, a.stride_w}) +
           ", pads=" + list_str({a.pad_top, a.pad_left, a.pad_bottom, a.pad_right}) +
           ", dilation=" + list_str({a.dilation_h, a.dilation_w}) +
           ", groups=" + std::to_string(a.groups) + (a.residual ? ", residual" : "") +
           (a.relu ? ", relu" : "");
  }
  std::string operator()(const Pool2dAttrs& a) const {
    return "kernel=" + list_str({a.kernel_h, a.kernel_w}) +
           ", stride=" + list_str({a.stride_h, a.stride_w}) +
           ", pads=" + list_str({a.pad_top, a.pad_left, a.pad_bottom, a.pad_right}) +
           ", dilation=" + list_str({a.dilation_h, a.dilation_w}) +
           ", ceil_mode=" + (a.ceil_mode ? "true" : "false") +
           ", count_include_pad=" + (a.count_include_pad ? "true" : "false") +
           (a.channels_last ? ", channels_last" : "");
  }
};
}  // namespace

const char* attention_wrt_name(AttentionWrt w) {
  switch (w) {
    case AttentionWrt::q:
      return "q";
    case AttentionWrt::k:
      return "k";
    case AttentionWrt::v:
      return "v";
    case AttentionWrt::kv:
      return "kv";
  }
  return "?";
}

std::string attrs_str(const Attrs& attrs) {
  return std::visit(Printer{}, attrs);
}

}  // namespace zc::ops

#include "util/bytes.h"

namespace zc::ops {

namespace {
void write_opt(ByteWriter& w, const std::optional<double>& v) {
  w.u8(v.has_value());
  w.f64(v.value_or(0.0));
}
std::optional<double> read_opt(ByteReader& r) {
  bool has = r.u8() != 0;
  double v = r.f64();
  return has ? std::optional<double>(v) : std::nullopt;
}

struct Writer {
  ByteWriter& w;
  void operator()(const NoAttrs&) const {}
  void operator()(const GeluAttrs& a) const { w.u8(static_cast<uint8_t>(a.approximate)); }
  void operator()(const CastAttrs& a) const { w.u8(static_cast<uint8_t>(a.dtype)); }
  void operator()(const ClampAttrs& a) const {
    write_opt(w, a.min);
    write_opt(w, a.max);
  }
  void operator()(const ReduceAttrs& a) const {
    w.i64s(a.dims);
    w.u8(a.keepdim);
    w.i64(a.correction);
  }
  void operator()(const ShapeAttrs& a) const { w.i64s(a.shape); }
  void operator()(const PermuteAttrs& a) const { w.i64s(a.dims); }
  void operator()(const SliceAttrs& a) const {
    w.i64(a.dim);
    w.i64(a.start);
    w.i64(a.end);
    w.i64(a.step);
  }
  void operator()(const DimAttrs& a) const { w.i64(a.dim); }
  void operator()(const LayerNormAttrs& a) const {
    w.i64(a.normalized_ndim);
    w.f64(a.eps);
    w.u8(a.has_weight);
    w.u8(a.has_bias);
  }
  void operator()(const AttentionAttrs& a) const {
    w.u8(a.causal);
    w.f64(a.scale);
  }
  void operator()(const AttentionGradAttrs& a) const {
    w.u8(a.causal);
    w.f64(a.scale);
    w.u8(static_cast<uint8_t>(a.wrt));
  }
  void operator()(const Conv2dAttrs& a) const {
    w.i64s(std::vector<int64_t>{a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.pad_bottom,
                                a.pad_right, a.dilation_h, a.dilation_w, a.groups,
                                int64_t{a.residual}, int64_t{a.relu}});
  }
  void operator()(const Pool2dAttrs& a) const {
    w.i64s(std::vector<int64_t>{a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.pad_top,
                                a.pad_left, a.pad_bottom, a.pad_right, a.dilation_h, a.dilation_w});
    w.u8(a.ceil_mode);
    w.u8(a.count_include_pad);
    w.u8(a.channels_last);
  }
};

template <size_t I = 0>
Attrs read_alternative(size_t index, ByteReader& r) {
  if constexpr (I < std::variant_size_v<Attrs>) {
    if (index != I) return read_alternative<I + 1>(index, r);
    using A = std::variant_alternative_t<I, Attrs>;
    A a{};
    if constexpr (std::is_same_v<A, GeluAttrs>) {
      uint8_t v = r.u8();
      if (v > 1) throw Error("attributes: bad gelu approximation " + std::to_string(v));
      a.approximate = static_cast<GeluApprox>(v);
    } else if constexpr (std::is_same_v<A, CastAttrs>) {
      uint8_t v = r.u8();
      if (v >= kNumDTypes) throw Error("attributes: bad dtype " + std::to_string(v));
      a.dtype = static_cast<DType>(v);
    } else if constexpr (std::is_same_v<A, ClampAttrs>) {
      a.min = read_opt(r);
      a.max = read_opt(r);
    } else if constexpr (std::is_same_v<A, ReduceAttrs>) {
      a.dims = r.i64s();
      a.keepdim = r.u8() != 0;
      a.correction = r.i64();
    } else if constexpr (std::is_same_v<A, ShapeAttrs>) {
      a.shape = r.i64s();
    } else if constexpr (std::is_same_v<A, PermuteAttrs>) {
      a.dims = r.i64s();
    } else if constexpr (std::is_same_v<A, SliceAttrs>) {
      a.dim = r.i64();
      a.start = r.i64();
      a.end = r.i64();
      a.step = r.i64();
    } else if constexpr (std::is_same_v<A, DimAttrs>) {
      a.dim = r.i64();
    } else if constexpr (std::is_same_v<A, LayerNormAttrs>) {
      a.normalized_ndim = r.i64();
      a.eps = r.f64();
      a.has_weight = r.u8() != 0;
      a.has_bias = r.u8() != 0;
    } else if constexpr (std::is_same_v<A, AttentionAttrs>) {
      a.causal = r.u8() != 0;
      a.scale = r.f64();
    } else if constexpr (std::is_same_v<A, AttentionGradAttrs>) {
      a.causal = r.u8() != 0;
      a.scale = r.f64();
      uint8_t wrt = r.u8();
      if (wrt > static_cast<uint8_t>(AttentionWrt::kv)) {
        throw Error("attributes: bad attention gradient operand " + std::to_string(wrt));
      }
      a.wrt = static_cast<AttentionWrt>(wrt);
    } else if constexpr (std::is_same_v<A, Conv2dAttrs>) {
      std::vector<int64_t> v = r.i64s();
      if (v.size() != 11) throw Error("attributes: conv2d needs 11 integers");
      a = Conv2dAttrs{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9] != 0, v[10] != 0};
    } else if constexpr (std::is_same_v<A, Pool2dAttrs>) {
      std::vector<int64_t> v = r.i64s();
      if (v.size() != 10) throw Error("attributes: a 2-d pool needs 10 integers");
      a = Pool2dAttrs{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]};
      a.ceil_mode = r.u8() != 0;
      a.count_include_pad = r.u8() != 0;
      a.channels_last = r.u8() != 0;
    }
    return a;
  } else {
    throw Error("attributes: unknown kind " + std::to_string(index));
  }
}
}  // namespace

void write_attrs(ByteWriter& w, const Attrs& attrs) {
  w.u8(static_cast<uint8_t>(attrs.index()));
  std::visit(Writer{w}, attrs);
}

Attrs read_attrs(ByteReader& r) {
  return read_alternative(r.u8(), r);
}

}  // namespace zc::ops
