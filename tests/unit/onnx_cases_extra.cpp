// ONNX cases of the less common operators zc composes (onnx_cases.h): CastLike, Tan and the
// hyperbolic functions, OneHot, EyeLike, Hardmax, MeanVarianceNormalization, LpNormalization,
// GlobalLpPool, LRN and ReduceProd, on random inputs with dims of one, odd lengths and
// integer dtypes where the operator takes them.
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

namespace {

// A node of input "x" (dtype xt) and constants `inits` to output "out" (dtype ot).
Builder node_of(const std::string& op, DType xt, const Shape& x, DType ot,
                std::vector<Attr> attrs = {},
                const std::vector<std::pair<std::string, Tensor>>& inits = {}, int64_t opset = 17) {
  return one_typed(op, xt, x, ot, std::move(attrs), inits, 1, opset);
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

// Values in [-2, 2) of dtype t (a product of a few stays small and exact).
Tensor small_values(const Shape& s, DType t) {
  if (t == DType::f32) return uniform(s, -2, 2);
  return randint(-2, 3, s, t);
}

// LRN's definition as ONNX nodes: x / (bias + alpha / size * the sum of x^2 over channels
// c - floor((size - 1) / 2) to c + ceil((size - 1) / 2))^beta.
Builder lrn_as_nodes(const Shape& x, int64_t size, float alpha, float beta, float bias) {
  const int64_t back = (size - 1) / 2, forward = size - 1 - back, channels = x[1];
  Builder b;
  b.input("x", DType::f32, x).output("out0");
  b.init("pads", i64s({0, back, 0, 0, 0, forward, 0, 0})).init("axis", i64s({1}));
  b.init("scale", full({}, alpha / static_cast<float>(size))).init("bias", full({}, bias));
  b.init("exponent", full({}, -beta));
  b.node("Mul", {"x", "x"}, {"sq"}).node("Pad", {"sq", "pads"}, {"padded"});
  std::vector<std::string> window;
  for (int64_t j = 0; j < size; ++j) {
    const std::string k = std::to_string(j);
    b.init("start" + k, i64s({j})).init("end" + k, i64s({j + channels}));
    b.node("Slice", {"padded", "start" + k, "end" + k, "axis"}, {"w" + k});
    window.push_back("w" + k);
  }
  b.node("Sum", window, {"sum"}).node("Mul", {"sum", "scale"}, {"scaled"});
  b.node("Add", {"scaled", "bias"}, {"base"}).node("Pow", {"base", "exponent"}, {"factor"});
  b.node("Mul", {"x", "factor"}, {"out0"});
  return b;
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

  // OneHot: indices negative and outside the depth, each axis, dtypes ONNX Runtime registers
  // (indices, values, depth), depth as a vector of one and of 1, values as an input.
  for (int64_t axis : {-1, 0, 1, -2}) {
    const Shape i{3, 4};
    c.push_back({"OneHot axis " + std::to_string(axis),
                 node_of("OneHot", DType::i64, i, DType::f32, {Attr("axis", axis)},
                         {{"depth", i64_scalar(5)}, {"values", from_vector({-1.0f, 2.5f}, {2})}}),
                 {randint(-7, 7, i)}});
  }
  {
    struct Types {
      DType idx, val, depth;
    };
    for (const Types& t : std::vector<Types>{{DType::i64, DType::i64, DType::i64},
                                             {DType::f32, DType::i64, DType::i64},
                                             {DType::i32, DType::f32, DType::i32},
                                             {DType::i32, DType::f32, DType::f32},
                                             {DType::f32, DType::f32, DType::f32},
                                             {DType::i64, DType::i32, DType::f32},
                                             {DType::i64, DType::f32, DType::i32}}) {
      const Shape i{2, 1, 3};
      // Float indices hold whole numbers here: ONNX Runtime's versions read fractional ones
      // differently (onnx_extra_test.cpp, OneHotCastsFractionalIndicesAsTheSpecSays).
      const Tensor idx = randint(-6, 6, i, t.idx);
      const Tensor values = full({2}, 3.0, t.val) - cast(arange(2), t.val) * 4.0;  // {3, -1}
      c.push_back({"OneHot indices " + std::string(dtype_name(t.idx)) + ", values " +
                       std::string(dtype_name(t.val)) + ", depth " +
                       std::string(dtype_name(t.depth)),
                   node_of("OneHot", t.idx, i, t.val, {Attr("axis", 1)},
                           {{"depth", full({1}, 4, t.depth)}, {"values", values}}),
                   {idx}});
    }
  }
  c.push_back({"OneHot of one index, depth 1",
               node_of("OneHot", DType::i64, {1}, DType::f32, {},
                       {{"depth", i64_scalar(1)}, {"values", from_vector({0.0f, 1.0f}, {2})}}),
               {i64s({-1})}});
  {
    Builder b;
    b.input("x", DType::i64, {5}).input("values", DType::f32, {2}).output("out");
    b.init("depth", i64s({6}));
    b.node("OneHot", {"x", "depth", "values"}, {"out"}, {Attr("axis", 0)});
    c.push_back({"OneHot values an input", b, {randint(-6, 6, {5}), randn({2})}});
  }

  // EyeLike: diagonals above, below and past the matrix, dtype given or the input's.
  for (int64_t k : {0, 2, -1, 7, -3}) {
    c.push_back({"EyeLike k " + std::to_string(k),
                 node_of("EyeLike", DType::f32, {3, 5}, DType::f32, {Attr("k", k)}),
                 {randn({3, 5})}});
  }
  c.push_back({"EyeLike dtype i64 from f32",
               node_of("EyeLike", DType::f32, {4, 2}, DType::i64, {Attr("dtype", 7)}),
               {randn({4, 2})}});
  c.push_back({"EyeLike i32 input, tall, k -1",
               node_of("EyeLike", DType::i32, {4, 1}, DType::i32, {Attr("k", -1)}),
               {randint(0, 5, {4, 1}, DType::i32)}});
  c.push_back({"EyeLike 1x1 f64",
               node_of("EyeLike", DType::f64, {1, 1}, DType::f64),
               {randn({1, 1}).to(DType::f64)}});

  // Hardmax: each axis, ties (the first maximum wins), an axis of one.
  const Shape h{2, 3, 5};
  const Tensor ties = cast(randint(0, 3, h), DType::f32);
  for (int64_t axis : {-1, 0, 1}) {
    c.push_back({"Hardmax axis " + std::to_string(axis) + ", ties",
                 one("Hardmax", h, {Attr("axis", axis)}, {}, 1, 13),
                 {ties}});
  }
  c.push_back({"Hardmax default axis", one("Hardmax", h), {randn(h)}});
  c.push_back({"Hardmax axis of one", one("Hardmax", {3, 1}, {}, {}, 1, 21), {randn({3, 1})}});

  // MeanVarianceNormalization: the default axes, others, negative, over a dim of one.
  const Shape img{2, 3, 4, 5};
  c.push_back({"MeanVarianceNormalization", one("MeanVarianceNormalization", img), {randn(img)}});
  c.push_back({"MeanVarianceNormalization axes {1}",
               one("MeanVarianceNormalization", img, {Attr("axes", {1})}),
               {randn(img) * 3.0 + 1.0}});
  c.push_back({"MeanVarianceNormalization axes {0, -1}, rank 3",
               one("MeanVarianceNormalization", {3, 1, 7}, {Attr("axes", {0, -1})}),
               {randn({3, 1, 7})}});

  // LpNormalization: p 1 and 2, each axis, a dim of one, a row of zeros.
  for (int64_t p : {1, 2}) {
    for (int64_t axis : {-1, 0, 1}) {
      c.push_back({"LpNormalization p " + std::to_string(p) + " axis " + std::to_string(axis),
                   one("LpNormalization", {3, 5, 1}, {Attr("p", p), Attr("axis", axis)}),
                   {randn({3, 5, 1})}});
    }
  }
  {
    Tensor x = randn({4, 3});
    x = where(eq(arange(4).reshape({4, 1}), 2.0), zeros({}), x);
    c.push_back({"LpNormalization default, a zero row", one("LpNormalization", {4, 3}), {x}});
  }

  // GlobalLpPool: p 1, 2 (the default), 3; 1-d and 2-d windows, all dims of one.
  for (int64_t p : {1, 2, 3}) {
    c.push_back({"GlobalLpPool p " + std::to_string(p),
                 one("GlobalLpPool", img, {Attr("p", p)}),
                 {randn(img)}});
  }
  c.push_back({"GlobalLpPool default p, 1-d", one("GlobalLpPool", {2, 3, 7}), {randn({2, 3, 7})}});
  c.push_back({"GlobalLpPool all ones", one("GlobalLpPool", {1, 1, 1, 1}), {randn({1, 1, 1, 1})}});

  // LRN: windows of 1, odd, even and wider than the channels; each attribute. ONNX Runtime
  // refuses an even size, which ONNX defines (the window reaching one channel further forward
  // than back): those run against the formula written as ONNX nodes.
  for (int64_t size : {1, 3, 5, 9}) {
    c.push_back({"LRN size " + std::to_string(size),
                 one("LRN", {2, 5, 3, 4}, {Attr("size", size)}),
                 {randn({2, 5, 3, 4}) * 4.0}});
  }
  for (int64_t size : {2, 4}) {
    const Shape x{2, 5, 3, 4};
    const std::vector<Attr> attrs{Attr("size", size), Attr("alpha", 0.2f), Attr("beta", 0.7f),
                                  Attr("bias", 1.5f)};
    c.push_back({"LRN size " + std::to_string(size) + " (even)",
                 one("LRN", x, attrs),
                 {randn(x) * 2.0},
                 1e-4,
                 lrn_as_nodes(x, size, 0.2f, 0.7f, 1.5f)});
  }
  c.push_back({"LRN alpha, beta, bias",
               one("LRN", {1, 4, 3, 3},
                   {Attr("size", 3), Attr("alpha", 0.3f), Attr("beta", 0.6f), Attr("bias", 2.0f)}),
               {randn({1, 4, 3, 3})}});
  c.push_back({"LRN one channel",
               one("LRN", {2, 1, 2, 2}, {Attr("size", 3), Attr("alpha", 0.5f)}),
               {randn({2, 1, 2, 2})}});

  // ReduceProd: axes as an attribute (opset 13, 17) and as an input (18, 21), keepdims,
  // noop_with_empty_axes, every axis, odd lengths and a length of one, integers.
  const Shape r{3, 7, 1, 5};
  for (DType t : {DType::f32, DType::i64, DType::i32}) {
    const std::string ty(dtype_name(t));
    c.push_back({"ReduceProd (opset 13) axes {1} " + ty,
                 node_of("ReduceProd", t, r, t, {Attr("axes", {1})}, {}, 13),
                 {small_values(r, t)}});
    c.push_back({"ReduceProd (opset 17) axes {-1, 0}, keepdims 0 " + ty,
                 node_of("ReduceProd", t, r, t, {Attr("axes", {-1, 0}), Attr("keepdims", 0)}),
                 {small_values(r, t)}});
    c.push_back({"ReduceProd (opset 18) axes input {1, 2} " + ty,
                 node_of("ReduceProd", t, r, t, {}, {{"axes", i64s({1, 2})}}, 18),
                 {small_values(r, t)}});
  }
  c.push_back({"ReduceProd (opset 17) every axis",
               node_of("ReduceProd", DType::f32, r, DType::f32, {Attr("keepdims", 0)}),
               {small_values(r, DType::f32)}});
  c.push_back({"ReduceProd (opset 18) no axes: every axis",
               node_of("ReduceProd", DType::i64, r, DType::i64, {}, {}, 18),
               {small_values(r, DType::i64)}});
  c.push_back({"ReduceProd (opset 18) empty axes input",
               node_of("ReduceProd", DType::f32, {2, 3}, DType::f32, {Attr("keepdims", 0)},
                       {{"axes", i64s({})}}, 18),
               {small_values({2, 3}, DType::f32)}});
  c.push_back(
      {"ReduceProd (opset 21) noop_with_empty_axes",
       node_of("ReduceProd", DType::f32, r, DType::f32, {Attr("noop_with_empty_axes", 1)}, {}, 21),
       {small_values(r, DType::f32)}});
  c.push_back(
      {"ReduceProd (opset 18) over an empty dim: ones",
       node_of("ReduceProd", DType::f32, {2, 0, 3}, DType::f32, {}, {{"axes", i64s({1})}}, 18),
       {zeros({2, 0, 3})}});
  c.push_back({"ReduceProd (opset 18) 33 elements of i64",
               node_of("ReduceProd", DType::i64, {2, 33}, DType::i64, {Attr("keepdims", 0)},
                       {{"axes", i64s({-1})}}, 18),
               {randint(1, 4, {2, 33})}});
}

}  // namespace zc::test::onnx_model

#endif
