// Elementwise unary ops, including cast. Float-valued ops (exp, log, ...) on integer or bool
// inputs produce f32, as in torch.
#include <cmath>

#include "ops/dispatch.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"

namespace zc::ops {

Tensor eager_cast(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  auto plan = make_loop_plan<2>(t.shape(), {&out, &t});
  visit_dtype(dtype, [&](auto to_tag) {
    using To = decltype(to_tag);
    visit_dtype(t.dtype(), [&](auto from_tag) {
      using From = decltype(from_tag);
      run_loop(plan, elem_ptr<To>(out), std::tuple<const From*>(elem_ptr<From>(t)),
               [](From v) { return convert_element<To>(v); });
    });
  });
  return out;
}

Tensor eager_contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  // Another device's copy is its kernels' (the CPU loop below reads host memory).
  if (!t.device().is_cpu()) return call1(OpId::copy, {t});
  return eager_cast(t, t.dtype());
}

namespace {

// Each functor maps a compute-type value; `float_valued` ops promote integers to f32. `c` is
// the same function as a C expression (ops/elementwise.h), for generated code.
struct Neg {
  static constexpr bool float_valued = false;
  template <class T>
  T operator()(T x) const {
    return -x;
  }
  static std::string c(const CExpr& e) { return "(-" + e.x() + ")"; }
};
struct Abs {
  static constexpr bool float_valued = false;
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(-x) : x;
  }
  static std::string c(const CExpr& e) {
    const std::string& x = e.x();
    return e.floating() ? "zc_fabs(" + x + ")" : "(" + x + " < 0 ? -" + x + " : " + x + ")";
  }
};
struct Relu {
  static constexpr bool float_valued = false;
  // NaN stays NaN, as in torch.
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
  static std::string c(const CExpr& e) {
    return "(" + e.x() + " < 0 ? " + e.lit(0) + " : " + e.x() + ")";
  }
};
struct Exp {
  static constexpr bool float_valued = true;
  template <class T>
  T operator()(T x) const {
    return std::exp(x);
  }
  static std::string c(const CExpr& e) { return "zc_exp(" + e.x() + ")"; }
};
struct Log {
  static constexpr bool float_valued = true;
  template <class T>
  T operator()(T x) const {
    return std::log(x);
  }
  static std::string c(const CExpr& e) { return "zc_log(" + e.x() + ")"; }
};
struct Sqrt {
  static constexpr bool float_valued = true;
  template <class T>
  T operator()(T x) const {
    return std::sqrt(x);
  }
  static std::string c(const CExpr& e) { return "zc_sqrt(" + e.x() + ")"; }
};
struct Rsqrt {
  static constexpr bool float_valued = true;
  template <class T>
  T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
  static std::string c(const CExpr& e) { return "(" + e.lit(1) + " / zc_sqrt(" + e.x() + "))"; }
};
struct Tanh {
  static constexpr bool float_valued = true;
  template <class T>
  T operator()(T x) const {
    return std::tanh(x);
  }
  static std::string c(const CExpr& e) { return "zc_tanh(" + e.x() + ")"; }
};
struct Sigmoid {
  static constexpr bool float_valued = true;
  template <class T>
  T operator()(T x) const {
    return T(1) / (T(1) + std::exp(-x));
  }
  static std::string c(const CExpr& e) {
    return "(" + e.lit(1) + " / (" + e.lit(1) + " + zc_exp(-" + e.x() + ")))";
  }
};
struct Erf {
  static constexpr bool float_valued = true;
  template <class T>
  T operator()(T x) const {
    return std::erf(x);
  }
  static std::string c(const CExpr& e) { return "zc_erf(" + e.x() + ")"; }
};
struct Gelu {
  static constexpr bool float_valued = true;
  bool tanh_approx = false;
  template <class T>
  T operator()(T x) const {
    if (tanh_approx) {
      const T k = T(0.7978845608028654);  // sqrt(2/pi)
      return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
    return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
  }
  static std::string c(const CExpr& e) {
    const std::string& x = e.x();
    if (std::get<GeluAttrs>(e.attrs).approximate == GeluApprox::tanh) {
      return "(" + e.lit(0.5) + " * " + x + " * (" + e.lit(1) + " + zc_tanh(" +
             e.lit(0.7978845608028654) + " * (" + x + " + " + e.lit(0.044715) + " * " + x + " * " +
             x + " * " + x + "))))";
    }
    return "(" + e.lit(0.5) + " * " + x + " * (" + e.lit(1) + " + zc_erf(" + x + " * " +
           e.lit(0.7071067811865476) + ")))";
  }
};
struct Clamp {
  static constexpr bool float_valued = false;
  double lo = -INFINITY, hi = INFINITY;
  template <class T>
  T operator()(T x) const {
    // Comparisons in double so integer bounds are exact; NaN passes through unchanged.
    double v = static_cast<double>(x);
    if (v < lo) return static_cast<T>(lo);
    if (v > hi) return static_cast<T>(hi);
    return x;
  }
  static std::string c(const CExpr& e) {
    const auto& a = std::get<ClampAttrs>(e.attrs);
    const std::string& x = e.x();
    std::string out = x;
    auto bound = [&](double b) { return c_literal(b, DType::f64); };
    if (a.max) {
      out = "((double)" + x + " > " + bound(*a.max) + " ? " + e.cast(bound(*a.max)) + " : " + out +
            ")";
    }
    if (a.min) {
      out = "((double)" + x + " < " + bound(*a.min) + " ? " + e.cast(bound(*a.min)) + " : " + out +
            ")";
    }
    return out;
  }
};

template <class F>
F make_functor(const Attrs& attrs) {
  F f{};
  if constexpr (std::is_same_v<F, Gelu>) {
    f.tanh_approx = std::get<GeluAttrs>(attrs).approximate == GeluApprox::tanh;
  } else if constexpr (std::is_same_v<F, Clamp>) {
    const auto& a = std::get<ClampAttrs>(attrs);
    if (a.min) f.lo = *a.min;
    if (a.max) f.hi = *a.max;
  }
  return f;
}

template <class F>
std::vector<TensorMeta> unary_infer(std::span<const TensorMeta> in, const Attrs&) {
  TensorMeta out = in[0];
  if constexpr (F::float_valued) out.dtype = floating_dtype(out.dtype);
  if constexpr (std::is_same_v<F, Neg>) {
    if (out.dtype == DType::boolean) op_error("neg", "bool tensors cannot be negated; use where");
  }
  return {out};
}

template <class F>
std::vector<Tensor> unary_eager(std::span<const Tensor> in, const Attrs& attrs,
                                std::span<const TensorMeta> outs) {
  TensorMeta m = meta_of(in[0]);
  DType ct = elementwise_compute_dtype(ComputeRule::output, {&m, 1}, outs[0].dtype);
  Tensor x = as_dtype(in[0], ct);
  Tensor out = Tensor::empty(outs[0].shape, ct);
  auto plan = make_loop_plan<2>(out.shape(), {&out, &x});
  F f = make_functor<F>(attrs);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    run_loop(plan, elem_ptr<T>(out), std::tuple<const T*>(elem_ptr<T>(x)), f);
  };
  switch (ct) {
    case DType::f32:
      run(float{});
      break;
    case DType::f64:
      run(double{});
      break;
    case DType::i64:
      run(int64_t{});
      break;
    case DType::i32:
      run(int32_t{});
      break;
    default:
      ZC_CHECK(false, "no compute type");
  }
  return {as_dtype(out, outs[0].dtype)};
}

std::vector<TensorMeta> cast_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  TensorMeta out = in[0];
  out.dtype = std::get<CastAttrs>(attrs).dtype;
  return {out};
}

std::vector<Tensor> cast_eager(std::span<const Tensor> in, const Attrs& attrs,
                               std::span<const TensorMeta>) {
  return {eager_cast(in[0], std::get<CastAttrs>(attrs).dtype)};
}

// Conversion as convert_element does it: nonzero is true, float to integer truncates.
std::string cast_c(const CExpr& e) {
  return e.type == DType::boolean ? "(" + e.x() + " != 0)" : e.cast(e.x());
}

template <class F, class A = NoAttrs>
OpDef unary_def(OpId id) {
  return OpDef{.id = id,
               .attrs_index = attrs_index_of<A>(),
               .infer = unary_infer<F>,
               .eager = unary_eager<F>,
               .compute = ComputeRule::output,
               .c_expr = F::c};
}

}  // namespace

void define_unary_ops(OpTable& t) {
  t.define(unary_def<Neg>(OpId::neg));
  t.define(unary_def<Abs>(OpId::abs));
  t.define(unary_def<Exp>(OpId::exp));
  t.define(unary_def<Log>(OpId::log));
  t.define(unary_def<Sqrt>(OpId::sqrt));
  t.define(unary_def<Rsqrt>(OpId::rsqrt));
  t.define(unary_def<Tanh>(OpId::tanh));
  t.define(unary_def<Sigmoid>(OpId::sigmoid));
  t.define(unary_def<Relu>(OpId::relu));
  t.define(unary_def<Gelu, GeluAttrs>(OpId::gelu));
  t.define(unary_def<Erf>(OpId::erf));
  t.define(unary_def<Clamp, ClampAttrs>(OpId::clamp));
  t.define(OpDef{.id = OpId::cast,
                 .attrs_index = attrs_index_of<CastAttrs>(),
                 .infer = cast_infer,
                 .eager = cast_eager,
                 .compute = ComputeRule::cast,
                 .c_expr = cast_c});
}

}  // namespace zc::ops
