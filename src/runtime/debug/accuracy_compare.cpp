#include "runtime/debug/accuracy_compare.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <cstdio>

namespace zc::runtime {

Tolerance default_tolerance(DType dtype, bool bf16_products) {
  switch (dtype) {
    case DType::f64:
      return {1e-7, 1e-7};
    case DType::f32:
      // Operands rounded to 8 bits of mantissa: about 2^-8 sqrt(K) relative per product.
      return bf16_products ? Tolerance{2e-2, 2e-2} : Tolerance{1e-4, 1e-4};
    case DType::f16:
      return {1e-2, 1e-2};
    case DType::bf16:
      return {2e-2, 2e-2};
    default:
      return {0, 0};  // integers and booleans are exact
  }
}

Tolerance tolerance_for(const AccuracyCheck& check, DType dtype, bool bf16_products) {
  Tolerance t = default_tolerance(dtype, bf16_products);
  if (check.atol >= 0) t.atol = check.atol;
  if (check.rtol >= 0) t.rtol = check.rtol;
  return t;
}

namespace {

Tensor host_f64(const Tensor& t) {
  Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  return h.to(DType::f64).contiguous();
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

AccuracyOutput compare_values(const Tensor& compiled, const Tensor& eager, Tolerance tol) {
  AccuracyOutput out;
  out.shape = compiled.shape();
  out.dtype = compiled.dtype();
  out.atol = tol.atol;
  out.rtol = tol.rtol;
  if (compiled.shape() != eager.shape()) {
    out.passed = false;
    out.problem =
        "shape " + shape_str(compiled.shape()) + " where eager has " + shape_str(eager.shape());
    return out;
  }
  if (compiled.dtype() != eager.dtype()) {
    out.passed = false;
    out.problem = "dtype " + std::string(dtype_name(compiled.dtype())) + " where eager has " +
                  std::string(dtype_name(eager.dtype()));
    return out;
  }
  const Tensor c = host_f64(compiled), e = host_f64(eager);
  const double* cv = c.data<double>();
  const double* ev = e.data<double>();
  const int64_t n = c.numel();
  double scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(ev[i])) scale = std::max(scale, std::fabs(ev[i]));
  }
  const double abs_part = tol.atol * scale;
  int64_t not_finite = 0, first_not_finite = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(ev[i])) continue;
    if (!std::isfinite(cv[i])) {
      if (not_finite++ == 0) first_not_finite = i;
      continue;
    }
    const double d = std::fabs(cv[i] - ev[i]);
    out.max_abs = std::max(out.max_abs, d);
    // Elements within the absolute part are rounding whatever their relative difference.
    if (std::fabs(ev[i]) > abs_part) out.max_rel = std::max(out.max_rel, d / std::fabs(ev[i]));
    if (d > abs_part + tol.rtol * std::fabs(ev[i])) out.passed = false;
  }
  if (not_finite) {
    out.passed = false;
    out.problem = std::to_string(not_finite) +
                  " NaN or Inf where eager has finite values (first: " + "element " +
                  std::to_string(first_not_finite) + ", " + number(cv[first_not_finite]) +
                  " where eager has " + number(ev[first_not_finite]) + ")";
  }
  return out;
}

}  // namespace zc::runtime
