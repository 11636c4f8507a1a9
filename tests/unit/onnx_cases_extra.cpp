// ONNX cases of the less common operators zc composes (onnx_cases.h): CastLike, Tan and the
// hyperbolic functions.
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

namespace {

// A node of input "x" (dtype xt) and constants `inits` to output "out" (dtype ot).
Builder node_of(const std::string& op, DType xt, const Shape& x, DType ot,
                std::vector<Attr> attrs = {},
                const std::vector<std::pair<std::string, Tensor>>& inits = {}, int64_t opset = 17) {
  Builder b(opset);
  b.input("x", xt, x).output("out", ot);
  std::vector<std::string> in{"x"};
  for (const auto& [name, t] : inits) {
    if (name.empty()) {
      in.push_back("");
      continue;
    }
    b.init(name, t);
    in.push_back(name);
  }
  b.node(op, in, {"out"}, std::move(attrs));
  return b;
}

// Uniform in [lo, hi), with a few values of the given magnitudes (near the point where a
// textbook formula cancels) at the start.
Tensor uniform(const Shape& s, double lo, double hi, const std::vector<float>& special = {}) {
  Tensor t = (rand(s) * (hi - lo) + lo).contiguous();
  float* p = t.data<float>();
  for (size_t k = 0; k < special.size() && static_cast<int64_t>(k) < t.numel(); ++k)
    p[k] = special[k];
  return t;
}

}  // namespace

void add_extra_cases(std::vector<Case>& c) {
  // CastLike: to the second input's dtype, the same dtype, saturate (opset 19).
  struct Like {
    DType from, to;
  };
  for (const Like& l : std::vector<Like>{{DType::f32, DType::i64},
                                         {DType::i32, DType::f32},
                                         {DType::f32, DType::f64},
                                         {DType::i64, DType::i32},
                                         {DType::f32, DType::boolean},
                                         {DType::f32, DType::f32}}) {
    const Shape s{2, 1, 5};
    const Tensor x = l.from == DType::f32 ? randn(s) * 10.0 : randint(-100, 100, s, l.from);
    c.push_back(
        {"CastLike " + std::string(dtype_name(l.from)) + " to " + std::string(dtype_name(l.to)),
         node_of("CastLike", l.from, s, l.to, {}, {{"like", zeros({1}, l.to)}}, 15),
         {x}});
  }
  c.push_back({"CastLike (opset 19, saturate)",
               node_of("CastLike", DType::f32, {3}, DType::f64, {Attr("saturate", 1)},
                       {{"like", zeros({}, DType::f64)}}, 19),
               {randn({3})}});

  // The trigonometric and hyperbolic functions on [-3, 3) with values near 0 (and near 1 for
  // acosh, near +-1 for atanh), to 1e-5.
  const Shape s{3, 7};
  const std::vector<float> tiny{0.0f, 1e-7f, -3e-6f, 1e-4f, -2e-3f, 0.03f, -0.4999f, 0.5f};
  c.push_back({"Tan", one("Tan", s), {uniform(s, -3, 3, tiny)}, 1e-5});
  c.push_back(
      {"Tan near pi/2", one("Tan", {4}), {from_vector({1.5f, -1.55f, 1.57f, 1.4f}, {4})}, 1e-5});
  for (const char* op : {"Sinh", "Cosh", "Asinh"}) {
    c.push_back({op, one(op, s), {uniform(s, -3, 3, tiny)}, 1e-5});
  }
  c.push_back({"Acosh",
               one("Acosh", s),
               {uniform(s, 1, 4, {1.0f, 1.0000001f, 1.00001f, 1.001f, 1.3f})},
               1e-5});
  c.push_back({"Atanh",
               one("Atanh", s),
               {uniform(s, -0.999, 0.999, {0.0f, 1e-7f, -1e-5f, 0.3f, -0.99999f, 0.9999f})},
               1e-5});
  c.push_back({"Sinh of one element", one("Sinh", {1}), {from_vector({-0.25f}, {1})}, 1e-5});
}

}  // namespace zc::test::onnx_model

#endif
