// Elementwise unary ops, including cast. Float-valued ops (exp, log, ...) on integer or bool
// inputs produce f32, as in torch.
#include <cmath>

#include "cpu/activation.h"
#include "ops/derivative.h"
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
  static constexpr bool transcendental = false;
  template <class T>
  T operator()(T x) const {
    return -x;
  }
  static std::string c(const CExpr& e) { return "(-" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor&, const Attrs&) { return -g; }
};
struct Abs {
  static constexpr bool float_valued = false;
  static constexpr bool transcendental = false;
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(-x) : x;
  }
  static std::string c(const CExpr& e) {
    const std::string& x = e.x();
    return e.floating() ? "zc_fabs(" + x + ")" : "(" + x + " < 0 ? -" + x + " : " + x + ")";
  }
  // sign(x): 0 at 0, as torch.
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
    return g * (cast(gt(x, 0.0), g.dtype()) - cast(lt(x, 0.0), g.dtype()));
  }
};
struct Relu {
  static constexpr bool float_valued = false;
  static constexpr bool transcendental = false;
  template <class T>
  T operator()(T x) const {
    return cpu::relu_value(x);
  }
  static std::string c(const CExpr& e) {
    return "(" + e.x() + " < 0 ? " + e.lit(0) + " : " + e.x() + ")";
  }
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor& y, const Attrs&) {
    return where(gt(y, 0.0), g, zero_like(g));
  }
  static EpilogueAct epilogue_act(const Attrs&) { return EpilogueAct::relu; }
};
struct Exp {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::exp(x);
  }
  static std::string c(const CExpr& e) { return "zc_exp(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor& y, const Attrs&) { return g * y; }
};
struct Log {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::log(x);
  }
  static std::string c(const CExpr& e) { return "zc_log(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return g / x; }
};
struct Sqrt {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = false;
  template <class T>
  T operator()(T x) const {
    return std::sqrt(x);
  }
  static std::string c(const CExpr& e) { return "zc_sqrt(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor& y, const Attrs&) {
    return g * 0.5 / y;
  }
};
struct Rsqrt {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = false;
  template <class T>
  T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
  static std::string c(const CExpr& e) { return "(" + e.lit(1) + " / zc_sqrt(" + e.x() + "))"; }
  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3.
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor& y, const Attrs&) {
    return g * -0.5 * y * y * y;
  }
};
struct Tanh {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::tanh(x);
  }
  static std::string c(const CExpr& e) { return "zc_tanh(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor& y, const Attrs&) {
    return g * (1.0 - y * y);
  }
};
struct Sigmoid {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return T(1) / (T(1) + std::exp(-x));
  }
  static std::string c(const CExpr& e) {
    return "(" + e.lit(1) + " / (" + e.lit(1) + " + zc_exp(-" + e.x() + ")))";
  }
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor& y, const Attrs&) {
    return g * y * (1.0 - y);
  }
};
struct Erf {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::erf(x);
  }
  static std::string c(const CExpr& e) { return "zc_erf(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
    return g * 1.1283791670955126 * zc::exp(-(x * x));  // 2/sqrt(pi) e^-x^2
  }
};
struct Gelu {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  bool tanh_approx = false;
  template <class T>
  T operator()(T x) const {
    return cpu::gelu_value(x, tanh_approx);
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
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& attrs) {
    if (std::get<GeluAttrs>(attrs).approximate == GeluApprox::tanh) {
      const double k = 0.7978845608028654;
      Tensor t = zc::tanh(k * (x + 0.044715 * x * x * x));
      Tensor inner_grad = k * (1.0 + 3 * 0.044715 * x * x);
      return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_grad);
    }
    // Phi(x) + x phi(x), the standard normal's distribution and density.
    Tensor cdf = 0.5 * (1.0 + zc::erf(x * 0.7071067811865476));
    Tensor pdf = zc::exp(-0.5 * x * x) * 0.3989422804014327;
    return g * (cdf + x * pdf);
  }
  static EpilogueAct epilogue_act(const Attrs& attrs) {
    return std::get<GeluAttrs>(attrs).approximate == GeluApprox::tanh ? EpilogueAct::gelu_tanh
                                                                      : EpilogueAct::gelu_erf;
  }
};
// floor, ceil, round and trunc: an integral value of the same type. Integers (and bools) are
// integral already and come back as they are, in their dtype; floats keep theirs, so these are
// not float-valued. Their gradient is zero wherever it exists, as torch's.
template <class Mode>
struct Rounding {
  static constexpr bool float_valued = false;
  static constexpr bool transcendental = false;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return Mode::apply(x);
    } else {
      return x;
    }
  }
  static std::string c(const CExpr& e) {
    return e.floating() ? std::string(Mode::c_function) + "(" + e.x() + ")" : e.x();
  }
  static Tensor vjp(const Tensor& g, const Tensor&, const Tensor&, const Attrs&) {
    return zeros_like_on(g, g.shape());
  }
};
struct FloorMode {
  static constexpr const char* c_function = "zc_floor";
  template <class T>
  static T apply(T x) {
    return std::floor(x);
  }
};
struct CeilMode {
  static constexpr const char* c_function = "zc_ceil";
  template <class T>
  static T apply(T x) {
    return std::ceil(x);
  }
};
// Halves to the even neighbour (torch.round, ONNX Round), which the default rounding mode
// does; std::round would take them away from zero.
struct RoundMode {
  static constexpr const char* c_function = "zc_round";
  template <class T>
  static T apply(T x) {
    return std::nearbyint(x);
  }
};
struct TruncMode {
  static constexpr const char* c_function = "zc_trunc";
  template <class T>
  static T apply(T x) {
    return std::trunc(x);
  }
};
using Floor = Rounding<FloorMode>;
using Ceil = Rounding<CeilMode>;
using Round = Rounding<RoundMode>;
using Trunc = Rounding<TruncMode>;
struct Sin {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::sin(x);
  }
  static std::string c(const CExpr& e) { return "zc_sin(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
    return g * zc::cos(x);
  }
};
struct Cos {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::cos(x);
  }
  static std::string c(const CExpr& e) { return "zc_cos(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
    return -(g * zc::sin(x));
  }
};
// asin' = 1 / sqrt(1 - x^2), acos' = -asin', atan' = 1 / (1 + x^2): as torch, infinite at
// |x| = 1 and NaN beyond for asin and acos.
struct Asin {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::asin(x);
  }
  static std::string c(const CExpr& e) { return "zc_asin(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
    return g / zc::sqrt(1.0 - x * x);
  }
};
struct Acos {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::acos(x);
  }
  static std::string c(const CExpr& e) { return "zc_acos(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
    return -(g / zc::sqrt(1.0 - x * x));
  }
};
struct Atan {
  static constexpr bool float_valued = true;
  static constexpr bool transcendental = true;
  template <class T>
  T operator()(T x) const {
    return std::atan(x);
  }
  static std::string c(const CExpr& e) { return "zc_atan(" + e.x() + ")"; }
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
    return g / (x * x + 1.0);
  }
};
struct Clamp {
  static constexpr bool float_valued = false;
  static constexpr bool transcendental = false;
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
  // The gradient passes where min <= x <= max, as torch's.
  static Tensor vjp(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& attrs) {
    const auto& a = std::get<ClampAttrs>(attrs);
    Tensor r = g;
    if (a.max) r = where(le(x, *a.max), r, zero_like(g));
    if (a.min) r = where(ge(x, *a.min), r, zero_like(g));
    return r;
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

template <class F>
std::vector<Tensor> unary_vjp(const VjpArgs& a) {
  return {F::vjp(out_grad(a), a.inputs[0], a.outputs[0], a.attrs)};
}

// Only floating-point inputs have a gradient; the engine casts back to the input's dtype.
std::vector<Tensor> cast_vjp(const VjpArgs& a) {
  if (!is_floating(a.inputs[0].dtype())) return {Tensor()};
  return {out_grad(a)};
}

template <class F, class A = NoAttrs>
OpDef unary_def(OpId id) {
  OpDef def{.id = id,
            .attrs_index = attrs_index_of<A>(),
            .infer = unary_infer<F>,
            .eager = unary_eager<F>,
            .derivative = unary_vjp<F>,
            .compute = ComputeRule::output,
            .c_expr = F::c,
            .transcendental = F::transcendental};
  if constexpr (requires { F::epilogue_act; }) def.epilogue_act = F::epilogue_act;
  return def;
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
  t.define(unary_def<Floor>(OpId::floor));
  t.define(unary_def<Ceil>(OpId::ceil));
  t.define(unary_def<Round>(OpId::round));
  t.define(unary_def<Trunc>(OpId::trunc));
  t.define(unary_def<Sin>(OpId::sin));
  t.define(unary_def<Cos>(OpId::cos));
  t.define(unary_def<Asin>(OpId::asin));
  t.define(unary_def<Acos>(OpId::acos));
  t.define(unary_def<Atan>(OpId::atan));
  t.define(unary_def<Clamp, ClampAttrs>(OpId::clamp));
  t.define(OpDef{.id = OpId::cast,
                 .attrs_index = attrs_index_of<CastAttrs>(),
                 .infer = cast_infer,
                 .eager = cast_eager,
                 .derivative = cast_vjp,
                 .compute = ComputeRule::cast,
                 .c_expr = cast_c});
}

}  // namespace zc::ops
