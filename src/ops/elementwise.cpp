#include "ops/elementwise.h"

#include <cmath>
#include <cstdio>

#include "ops/eager.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "util/check.h"

namespace zc::ops {

DType elementwise_compute_dtype(ComputeRule rule, std::span<const TensorMeta> inputs, DType out) {
  DType t = out;
  if (rule == ComputeRule::promoted || rule == ComputeRule::promoted_floating ||
      rule == ComputeRule::comparison) {
    t = result_dtype(inputs);
    if (rule == ComputeRule::promoted_floating) t = floating_dtype(t);
  }
  t = compute_dtype(t);
  if (t == DType::boolean && rule != ComputeRule::comparison && rule != ComputeRule::cast) {
    t = DType::i32;
  }
  return t;
}

std::string c_type_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f64:
      return "double";
    case DType::i64:
      return "int64_t";
    case DType::i32:
      return "int32_t";
    case DType::boolean:
      return "bool";
    case DType::i8:
      return "int8_t";
    case DType::f16:
    case DType::bf16:
      break;
  }
  ZC_CHECK(false, << dtype_name(t) << " is a storage type; it computes in f32");
  return "";
}

std::string c_literal(double v, DType t) {
  if (t == DType::boolean) return v != 0 ? "true" : "false";
  const std::string T = c_type_name(t);
  if (std::isnan(v)) return "(" + T + ")NAN";
  if (std::isinf(v)) return "(" + T + ")(" + (v < 0 ? "-" : "") + "INFINITY)";
  char buf[64];
  if (is_integral(t)) {
    std::snprintf(buf, sizeof buf, "(%s)%lldLL", T.c_str(), static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "(%s)%.17g", T.c_str(), v);
  }
  return buf;
}

std::string CExpr::lit(double v) const {
  return c_literal(v, type);
}

std::string CExpr::cast(const std::string& e) const {
  return "(" + c_type_name(type) + ")(" + e + ")";
}

bool CExpr::floating() const {
  return is_floating(type);
}

}  // namespace zc::ops
