// Elementwise binary ops (broadcasting, promoting) and where.
#include <array>
#include <cmath>

#include "ops/derivative.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"

namespace zc::ops {

namespace {

enum class Result { same, floating, boolean };

// A binary derivative gives each operand's gradient in the output's shape (binary_vjp sums
// the broadcast dims away); Wanted says which operands want one.
using Grads = std::array<Tensor, 2>;
using Wanted = std::array<bool, 2>;

constexpr ComputeRule rule_of(Result r) {
  return r == Result::same       ? ComputeRule::promoted
         : r == Result::floating ? ComputeRule::promoted_floating
                                 : ComputeRule::comparison;
}

// An infix C expression "(a op b)".
std::string infix(const CExpr& e, const char* op) {
  return "(" + e.in[0] + " " + op + " " + e.in[1] + ")";
}

struct Add {
  static constexpr const char* name = "add";
  static constexpr Result result = Result::same;
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a + b);
  }
  static std::string c(const CExpr& e) { return infix(e, "+"); }
  static Grads vjp(const Tensor& g, const Tensor&, const Tensor&, const Tensor&, Wanted) {
    return {g, g};
  }
};
struct Sub {
  static constexpr const char* name = "sub";
  static constexpr Result result = Result::same;
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
  static std::string c(const CExpr& e) { return infix(e, "-"); }
  static Grads vjp(const Tensor& g, const Tensor&, const Tensor&, const Tensor&, Wanted w) {
    return {g, w[1] ? -g : Tensor()};
  }
};
struct Mul {
  static constexpr const char* name = "mul";
  static constexpr Result result = Result::same;
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a * b);
  }
  static std::string c(const CExpr& e) { return infix(e, "*"); }
  static Grads vjp(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, Wanted w) {
    return {w[0] ? g * b : Tensor(), w[1] ? g * a : Tensor()};
  }
};
struct Div {
  static constexpr const char* name = "div";
  static constexpr Result result = Result::floating;
  template <class T>
  T operator()(T a, T b) const {
    return a / b;
  }
  static std::string c(const CExpr& e) { return infix(e, "/"); }
  static Grads vjp(const Tensor& g, const Tensor&, const Tensor& b, const Tensor& y, Wanted w) {
    return {w[0] ? g / b : Tensor(), w[1] ? -g * y / b : Tensor()};
  }
};
// Integer powers are exact, by repeated squaring with two's-complement wrap-around (as the
// integer ops wrap). A negative exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise,
// base 0 included (where torch raises; a generated kernel cannot). Generated code calls the
// same algorithm (zc_ipow in each prelude); floating powers are the math library's pow.
template <class T>
T integer_pow(T a, T b) {
  if (b < 0) return a == 1 ? T(1) : a == -1 ? ((b & 1) ? T(-1) : T(1)) : T(0);
  uint64_t r = 1, x = static_cast<uint64_t>(a);
  for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
    if (e & 1) r *= x;
    x *= x;
  }
  return static_cast<T>(r);
}

struct Pow {
  static constexpr const char* name = "pow";
  static constexpr Result result = Result::same;
  static constexpr bool transcendental = true;  // on floats: zc_pow, an exp of a log
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      return integer_pow(a, b);
    }
  }
  // A constant exponent of 2 or 3 is a product (zc_square, zc_cube): a call of the math
  // library's pow keeps a loop from vectorizing, and GELU's tanh form, as GPT-2 and exporters
  // write it, cubes its input (its kernel took 25 ns an element on the CPU). x * x is pow's
  // value exactly; x * x * x is within one rounding of it, as torch's Inductor makes it too.
  static std::string c(const CExpr& e) {
    // The exponent as the emitter writes a constant: a literal, converted to the compute type.
    auto exponent_is = [&](double v) { return e.in[1] == e.lit(v) || e.in[1] == e.cast(e.lit(v)); };
    if (e.floating()) {
      if (exponent_is(2.0)) return "zc_square(" + e.in[0] + ")";
      if (exponent_is(3.0)) return "zc_cube(" + e.in[0] + ")";
      return "zc_pow(" + e.in[0] + ", " + e.in[1] + ")";
    }
    return "zc_ipow(" + e.in[0] + ", " + e.in[1] + ")";
  }
  // As torch: a zero exponent has no gradient through the base, and a zero base none through
  // a non-negative exponent (where the formulas would give 0 * inf).
  static Grads vjp(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y, Wanted w) {
    Tensor ga, gb;
    if (w[0]) ga = where(eq(b, 0.0), zero_like(g), g * b * pow(a, b - 1.0));
    if (w[1]) {
      Tensor v = g * y * zc::log(a);
      gb = where(eq(a, 0.0), where(ge(b, 0.0), zero_like(g), v), v);
    }
    return {ga, gb};
  }
};
// maximum/minimum propagate NaN, as torch does.
struct Maximum {
  static constexpr const char* name = "maximum";
  static constexpr Result result = Result::same;
  template <class T>
  T operator()(T a, T b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
  static std::string c(const CExpr& e) { return "zc_max(" + e.in[0] + ", " + e.in[1] + ")"; }
  // Ties split the gradient evenly, as torch.
  static Grads vjp(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, Wanted) {
    Tensor share = cast(gt(a, b), g.dtype()) + cast(eq(a, b), g.dtype()) * 0.5;
    return {g * share, g * (1.0 - share)};
  }
};
struct Minimum {
  static constexpr const char* name = "minimum";
  static constexpr Result result = Result::same;
  template <class T>
  T operator()(T a, T b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a < b ? a : b;
  }
  static std::string c(const CExpr& e) { return "zc_min(" + e.in[0] + ", " + e.in[1] + ")"; }
  static Grads vjp(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, Wanted) {
    Tensor share = cast(lt(a, b), g.dtype()) + cast(eq(a, b), g.dtype()) * 0.5;
    return {g * share, g * (1.0 - share)};
  }
};
// Integer remainders. C's % by zero is undefined (x86 traps), and so is the most negative
// value's % -1 (the quotient overflows): a divisor of 0 gives 0, as numpy's does (torch raises
// on the CPU, which a generated kernel cannot), and -1 gives 0, the true remainder, without
// dividing. Generated code calls the same (the shared helpers' zc_ifmod and zc_iremainder).
// Bools (which infer refuses; the eager kernel's dispatch instantiates them) divide by 0 or 1.
template <class T>
T integer_fmod(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return false;
  } else {
    return b == 0 || b == -1 ? T(0) : static_cast<T>(a % b);
  }
}
template <class T>
T integer_remainder(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return false;
  } else {
    T r = integer_fmod(a, b);
    return r != 0 && (r < 0) != (b < 0) ? static_cast<T>(r + b) : r;
  }
}
// Floating remainders with the divisor's sign, as Python's float % and numpy.mod: fmod's,
// moved by one divisor when the signs differ, and a zero signed as the divisor (torch.remainder
// keeps fmod's sign on a zero). Generated code calls zc_remainder, the same steps.
template <class T>
T floating_remainder(T a, T b) {
  T r = std::fmod(a, b);
  if (r != 0) return (r < 0) != (b < 0) ? static_cast<T>(r + b) : r;
  return std::copysign(T(0), b);
}

// fmod: the remainder of a / b truncated, with the sign of a (C's fmod, torch.fmod).
struct Fmod {
  static constexpr const char* name = "fmod";
  static constexpr Result result = Result::same;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else {
      return integer_fmod(a, b);
    }
  }
  static std::string c(const CExpr& e) {
    return std::string(e.floating() ? "zc_fmod(" : "zc_ifmod(") + e.in[0] + ", " + e.in[1] + ")";
  }
  // a - trunc(a / b) b, so b's gradient is -trunc(a / b), as torch's.
  static Grads vjp(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, Wanted w) {
    return {g, w[1] ? -g * zc::trunc(a / b) : Tensor()};
  }
};
// remainder: the remainder of a / b floored, with the sign of b (Python's %, torch.remainder,
// numpy.mod).
struct Remainder {
  static constexpr const char* name = "remainder";
  static constexpr Result result = Result::same;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return floating_remainder(a, b);
    } else {
      return integer_remainder(a, b);
    }
  }
  static std::string c(const CExpr& e) {
    return std::string(e.floating() ? "zc_remainder(" : "zc_iremainder(") + e.in[0] + ", " +
           e.in[1] + ")";
  }
  // a - floor(a / b) b.
  static Grads vjp(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, Wanted w) {
    return {g, w[1] ? -g * zc::floor(a / b) : Tensor()};
  }
};
// The C++ operator and the generated expression are the same token.
#define ZC_COMPARISON(Name, op)                                    \
  struct Name {                                                    \
    static constexpr const char* name = #Name;                     \
    static constexpr Result result = Result::boolean;              \
    template <class T>                                             \
    bool operator()(T a, T b) const {                              \
      return a op b;                                               \
    }                                                              \
    static std::string c(const CExpr& e) { return infix(e, #op); } \
  };
ZC_COMPARISON(eq, ==)
ZC_COMPARISON(ne, !=)
ZC_COMPARISON(lt, <)
ZC_COMPARISON(le, <=)
ZC_COMPARISON(gt, >)
ZC_COMPARISON(ge, >=)
#undef ZC_COMPARISON

template <class F>
std::vector<TensorMeta> binary_infer(std::span<const TensorMeta> in, const Attrs&) {
  std::string_view name = F::name;
  TensorMeta out;
  out.shape = broadcast_shapes(name, in[0].shape, in[1].shape);
  out.device = in[0].device;
  DType t = result_dtype(in);
  if constexpr (std::is_same_v<F, Sub>) {
    if (t == DType::boolean) {
      op_error("sub", "bool tensors cannot be subtracted (" + metas_str(in) +
                          "); use logical ops or cast first");
    }
  }
  if constexpr (std::is_same_v<F, Fmod> || std::is_same_v<F, Remainder>) {
    if (t == DType::boolean) {
      op_error(name, "bool tensors have no remainder (" + metas_str(in) +
                         "); cast them to an integer dtype first");
    }
  }
  if constexpr (F::result == Result::floating) t = floating_dtype(t);
  out.dtype = F::result == Result::boolean ? DType::boolean : t;
  return {out};
}

template <class F>
std::vector<Tensor> binary_eager(std::span<const Tensor> in, const Attrs&,
                                 std::span<const TensorMeta> outs) {
  // Inputs convert to the compute type of their promoted dtype; comparisons compare in it.
  std::vector<TensorMeta> metas{meta_of(in[0]), meta_of(in[1])};
  DType ct = elementwise_compute_dtype(rule_of(F::result), metas, outs[0].dtype);
  Tensor a = as_dtype(in[0], ct), b = as_dtype(in[1], ct);
  DType out_ct = F::result == Result::boolean ? DType::boolean : ct;
  Tensor out = Tensor::empty(outs[0].shape, out_ct);
  auto plan = make_loop_plan<3>(out.shape(), {&out, &a, &b});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<F::result == Result::boolean, bool, T>;
    run_loop(plan, elem_ptr<O>(out), std::tuple<const T*, const T*>(elem_ptr<T>(a), elem_ptr<T>(b)),
             F{});
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
    case DType::boolean:
      run(bool{});
      break;
    default:
      ZC_CHECK(false, "no compute type");
  }
  return {as_dtype(out, outs[0].dtype)};
}

template <class F>
std::vector<Tensor> binary_vjp(const VjpArgs& args) {
  Wanted w{args.wants(0), args.wants(1)};
  Grads g = F::vjp(out_grad(args), args.inputs[0], args.inputs[1], args.outputs[0], w);
  std::vector<Tensor> out(2);
  for (size_t i = 0; i < 2; ++i) {
    if (w[i] && g[i].defined()) out[i] = sum_to(g[i], args.inputs[i].shape());
  }
  return out;
}

// Comparisons have no derivative: their outputs are bool.
template <class F>
constexpr DerivativeFn binary_derivative() {
  if constexpr (F::result == Result::boolean) {
    return nullptr;
  } else {
    return binary_vjp<F>;
  }
}

// OpDef::transcendental; only Pow says so, the others are one instruction or a few.
template <class F>
constexpr bool transcendental() {
  if constexpr (requires { F::transcendental; }) {
    return F::transcendental;
  } else {
    return false;
  }
}

template <class F>
OpDef binary_def(OpId id) {
  return OpDef{.id = id,
               .min_inputs = 2,
               .max_inputs = 2,
               .attrs_index = attrs_index_of<NoAttrs>(),
               .infer = binary_infer<F>,
               .eager = binary_eager<F>,
               .derivative = binary_derivative<F>(),
               .compute = rule_of(F::result),
               .c_expr = F::c,
               .transcendental = transcendental<F>()};
}

std::vector<TensorMeta> where_infer(std::span<const TensorMeta> in, const Attrs&) {
  if (in[0].dtype != DType::boolean) {
    op_error("where",
             "condition must be bool, got " + meta_str(in[0]) + "; compare first (e.g. gt(x, 0))");
  }
  TensorMeta out;
  out.shape =
      broadcast_shapes("where", broadcast_shapes("where", in[0].shape, in[1].shape), in[2].shape);
  out.dtype = result_dtype(in.subspan(1));
  out.device = in[0].device;
  return {out};
}

struct Select {
  template <class T>
  T operator()(T c, T a, T b) const {
    return c != T(0) ? a : b;
  }
};

std::string where_c(const CExpr& e) {
  return "(" + e.in[0] + " ? " + e.in[1] + " : " + e.in[2] + ")";
}

// The condition has no gradient; each branch gets the gradient where it was chosen.
std::vector<Tensor> where_vjp(const VjpArgs& args) {
  const Tensor& g = out_grad(args);
  const Tensor& c = args.inputs[0];
  std::vector<Tensor> out(3);
  if (args.wants(1)) out[1] = sum_to(where(c, g, zero_like(g)), args.inputs[1].shape());
  if (args.wants(2)) out[2] = sum_to(where(c, zero_like(g), g), args.inputs[2].shape());
  return out;
}

std::vector<Tensor> where_eager(std::span<const Tensor> in, const Attrs&,
                                std::span<const TensorMeta> outs) {
  std::vector<TensorMeta> metas{meta_of(in[0]), meta_of(in[1]), meta_of(in[2])};
  DType ct = elementwise_compute_dtype(ComputeRule::output, metas, outs[0].dtype);
  Tensor c = as_dtype(in[0], ct), a = as_dtype(in[1], ct), b = as_dtype(in[2], ct);
  Tensor out = Tensor::empty(outs[0].shape, ct);
  auto plan = make_loop_plan<4>(out.shape(), {&out, &c, &a, &b});
  visit_dtype(ct, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, Half> && !std::is_same_v<T, BFloat16>) {
      run_loop(
          plan, elem_ptr<T>(out),
          std::tuple<const T*, const T*, const T*>(elem_ptr<T>(c), elem_ptr<T>(a), elem_ptr<T>(b)),
          Select{});
    }
  });
  return {as_dtype(out, outs[0].dtype)};
}

}  // namespace

void define_binary_ops(OpTable& t) {
  t.define(binary_def<Add>(OpId::add));
  t.define(binary_def<Sub>(OpId::sub));
  t.define(binary_def<Mul>(OpId::mul));
  t.define(binary_def<Div>(OpId::div));
  t.define(binary_def<Pow>(OpId::pow));
  t.define(binary_def<Maximum>(OpId::maximum));
  t.define(binary_def<Minimum>(OpId::minimum));
  t.define(binary_def<Fmod>(OpId::fmod));
  t.define(binary_def<Remainder>(OpId::remainder));
  t.define(binary_def<eq>(OpId::eq));
  t.define(binary_def<ne>(OpId::ne));
  t.define(binary_def<lt>(OpId::lt));
  t.define(binary_def<le>(OpId::le));
  t.define(binary_def<gt>(OpId::gt));
  t.define(binary_def<ge>(OpId::ge));
  t.define(OpDef{.id = OpId::where,
                 .min_inputs = 3,
                 .max_inputs = 3,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = where_infer,
                 .eager = where_eager,
                 .derivative = where_vjp,
                 .compute = ComputeRule::output,
                 .c_expr = where_c});
}

}  // namespace zc::ops
