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
};
}  // namespace

std::string attrs_str(const Attrs& attrs) {
  return std::visit(Printer{}, attrs);
}

}  // namespace zc::ops
