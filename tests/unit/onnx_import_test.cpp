// ONNX import: models built with the onnx library, one or a few nodes each, for every
// supported operator and its attributes, equal to ONNX Runtime's outputs (run by
// tests/tools/ort_run.py) eagerly and compiled; malformed and unsupported files raise
// zc::Error naming the cause; regions come from the exporter's scope names.
#include <gtest/gtest.h>

#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <filesystem>
#include <functional>
#include <limits>
#include <tuple>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include "unit/onnx_builder.h"
#include "unit/onnx_cases.h"

namespace zc {
namespace {

using test::onnx_model::Attr;
using test::onnx_model::Builder;
using test::onnx_model::Case;
using test::onnx_model::expect_refused;
using test::onnx_model::i64_scalar;
using test::onnx_model::i64s;
using test::onnx_model::one;
using test::onnx_model::positive;

// Operators and opset semantics from opset 18 to 21, and the activations, reductions and layout
// operators exporters use beyond the first set.
void add_newer_cases(std::vector<Case>& c) {
  const Shape s{2, 3, 4};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // Inputs with NaN, +inf and -inf among ordinary values.
  Tensor special = randn(s);
  special = where(gt(special, 1.0), full({}, nan), special);
  special = where(lt(special, -1.2), full({}, -inf), special);
  special = where(lt(abs(special), 0.05), full({}, inf), special);
  for (const char* op : {"IsNaN", "IsInf"}) {
    Builder b;
    b.input("x", DType::f32, s).output("out", DType::boolean);
    b.node(op, {"x"}, {"out"});
    c.push_back({op, b, {special}});
  }
  {
    Builder b;
    b.input("x", DType::f32, s).output("out", DType::boolean);
    b.node("IsInf", {"x"}, {"out"}, {Attr("detect_negative", 0)});
    c.push_back({"IsInf positive only", b, {special}});
  }
  for (const char* op : {"HardSwish", "Softplus", "Softsign", "Sign", "HardSigmoid", "LeakyRelu",
                         "Elu", "Selu", "Celu", "ThresholdedRelu", "Shrink"}) {
    c.push_back({op, one(op, s), {randn(s) * 3.0}});
  }
  c.push_back({"HardSigmoid alpha, beta",
               one("HardSigmoid", s, {Attr("alpha", 0.3f), Attr("beta", 0.4f)}),
               {randn(s) * 3.0}});
  c.push_back({"LeakyRelu alpha", one("LeakyRelu", s, {Attr("alpha", 0.1f)}), {randn(s)}});
  c.push_back({"Elu alpha", one("Elu", s, {Attr("alpha", 0.7f)}), {randn(s)}});
  c.push_back(
      {"ThresholdedRelu alpha", one("ThresholdedRelu", s, {Attr("alpha", 0.5f)}), {randn(s)}});
  c.push_back({"Shrink bias, lambd",
               one("Shrink", s, {Attr("bias", 0.2f), Attr("lambd", 0.6f)}),
               {randn(s)}});
  c.push_back({"Mish (opset 18)", one("Mish", s, {}, {}, 1, 18), {randn(s) * 3.0}});
  c.push_back({"PRelu per channel", one("PRelu", s, {}, {{"slope", randn({4})}}), {randn(s)}});
  c.push_back(
      {"Mean of three", one("Mean", s, {}, {{"y", randn({4})}, {"z", randn(s)}}), {randn(s)}});
  {
    Builder b;
    b.input("x", DType::f32, s).input("y", DType::f32, s).output("out", DType::boolean);
    b.node("Less", {"x", "y"}, {"lt"}).node("Greater", {"x", "y"}, {"gt"});
    b.node("Xor", {"lt", "gt"}, {"out"});
    c.push_back({"Xor", b, {randn(s), randn(s)}});
  }
  // Reductions: the newer names, and opset 18's axes as an input for every reduction.
  c.push_back({"ReduceL1", one("ReduceL1", s, {Attr("axes", {1})}), {randn(s)}});
  c.push_back({"ReduceL2 keepdims 0",
               one("ReduceL2", s, {Attr("axes", {2}), Attr("keepdims", 0)}),
               {randn(s)}});
  c.push_back({"ReduceSumSquare", one("ReduceSumSquare", s), {randn(s)}});
  c.push_back({"ReduceLogSum", one("ReduceLogSum", s, {Attr("axes", {0, 2})}), {positive(s)}});
  c.push_back({"ReduceLogSumExp (opset 18, axes input)",
               one("ReduceLogSumExp", s, {Attr("keepdims", 0)}, {{"axes", i64s({-1})}}, 1, 18),
               {randn(s) * 20.0}});
  c.push_back({"ReduceMean (opset 18, axes input)",
               one("ReduceMean", s, {}, {{"axes", i64s({0, 1})}}, 1, 18),
               {randn(s)}});
  c.push_back(
      {"ReduceMax (opset 18, no axes: all)", one("ReduceMax", s, {}, {}, 1, 18), {randn(s)}});
  c.push_back({"ReduceMin (opset 20, noop_with_empty_axes)",
               one("ReduceMin", s, {Attr("noop_with_empty_axes", 1)}, {}, 1, 20),
               {randn(s)}});
  for (const char* op : {"ArgMax", "ArgMin"}) {
    Builder b;
    b.input("x", DType::f32, s).output("out", DType::i64).output("k", DType::i64);
    b.node(op, {"x"}, {"out"}, {Attr("axis", 1), Attr("keepdims", 0)});
    b.node(op, {"x"}, {"k"}, {Attr("axis", -1)});
    c.push_back({op, b, {randn(s)}});
  }
  // Normalizations over channels.
  const Shape img{2, 6, 5, 4};
  c.push_back({"InstanceNormalization",
               one("InstanceNormalization", img, {Attr("epsilon", 1e-3f)},
                   {{"scale", randn({6})}, {"b", randn({6})}}),
               {randn(img)}});
  c.push_back({"GroupNormalization (opset 18: per group)",
               one("GroupNormalization", img, {Attr("num_groups", 3)},
                   {{"scale", randn({3})}, {"b", randn({3})}}, 1, 18),
               {randn(img)}});
  c.push_back({"GroupNormalization (opset 21: per channel)",
               one("GroupNormalization", img, {Attr("num_groups", 2), Attr("epsilon", 1e-3f)},
                   {{"scale", randn({6})}, {"b", randn({6})}}, 1, 21),
               {randn(img)}});
  // Layout.
  c.push_back({"Pad constant, negative and one-sided",
               one("Pad", {3, 5}, {}, {{"pads", i64s({1, -1, 0, 2})}, {"v", full({}, 1.5)}}),
               {randn({3, 5})}});
  c.push_back({"Pad reflect",
               one("Pad", {4, 5}, {Attr("mode", "reflect")}, {{"pads", i64s({2, 1, 1, 3})}}),
               {randn({4, 5})}});
  c.push_back({"Pad edge",
               one("Pad", {2, 3, 4}, {Attr("mode", "edge")}, {{"pads", i64s({0, 2, 1, 0, 1, 2})}}),
               {randn({2, 3, 4})}});
  c.push_back({"Pad (opset 18, axes input)",
               one("Pad", img, {},
                   {{"pads", i64s({1, 2, 1, 0})}, {"", Tensor()}, {"axes", i64s({-1, 2})}}, 1, 18),
               {randn(img)}});
  c.push_back({"Tile", one("Tile", s, {}, {{"repeats", i64s({2, 1, 3})}}), {randn(s)}});
  c.push_back({"DepthToSpace DCR",
               one("DepthToSpace", {1, 8, 2, 3}, {Attr("blocksize", 2)}),
               {randn({1, 8, 2, 3})}});
  c.push_back({"DepthToSpace CRD",
               one("DepthToSpace", {2, 8, 3, 2}, {Attr("blocksize", 2), Attr("mode", "CRD")}),
               {randn({2, 8, 3, 2})}});
  c.push_back({"SpaceToDepth",
               one("SpaceToDepth", {2, 3, 4, 6}, {Attr("blocksize", 2)}),
               {randn({2, 3, 4, 6})}});
  {
    Builder b;
    b.input("x", DType::f32, s).output("out", DType::i64);
    b.node("Size", {"x"}, {"out"});
    c.push_back({"Size", b, {randn(s)}});
  }
  c.push_back({"Split (opset 18, num_outputs, uneven)",
               one("Split", {2, 7}, {Attr("axis", 1), Attr("num_outputs", 3)}, {}, 3, 18),
               {randn({2, 7})}});
  c.push_back(
      {"AveragePool (opset 19, dilations 1)",
       one("AveragePool", img,
           {Attr("kernel_shape", {2, 2}), Attr("strides", {2, 2}), Attr("dilations", {1, 1})}, {},
           1, 19),
       {randn(img)}});
}

std::vector<Case> cases() {
  manual_seed(41);
  std::vector<Case> c;
  const Shape s{2, 3, 4};
  // Elementwise, broadcasting against an initializer.
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max", "Sum"}) {
    const bool pos = std::string(op) == "Pow";
    c.push_back({op,
                 one(op, s, {}, {{"y", pos ? positive({4}) : randn({4})}}),
                 {pos ? positive(s) : randn(s)}});
  }
  for (const char* op :
       {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Identity", "Dropout"}) {
    c.push_back({op, one(op, s), {randn(s)}});
  }
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) c.push_back({op, one(op, s), {positive(s)}});
  for (const char* op : {"Floor", "Ceil", "Sin", "Cos", "Atan"})
    c.push_back({op, one(op, s), {randn(s) * 3}});
  // Inside (-1, 1), and at both ends (past them both give NaN: OpsElementwise's test).
  for (const char* op : {"Asin", "Acos"}) {
    c.push_back({op, one(op, s), {rand(s) * 1.98 - 0.99}});
    c.push_back({std::string(op) + " at the ends",
                 one(op, {5}),
                 {from_vector(std::vector<float>{-1, 1, 0, -0.5, 0.999f}, {5})}});
  }
  // Round takes halves to even.
  c.push_back({"Round",
               one("Round", {2, 6}),
               {cat({from_vector(std::vector<float>{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}, {1, 6}),
                     randn({1, 6}) * 4},
                    0)}});
  // Mod: fmod=1 has the dividend's sign (floats), fmod=0 the divisor's (integers), both
  // broadcasting the divisor.
  c.push_back({"Mod fmod=1",
               one("Mod", s, {Attr("fmod", 1)},
                   {{"y", from_vector(std::vector<float>{1.5, -0.7, 2.0, -3.0}, {4})}}),
               {randn(s) * 4}});
  {
    Builder b;
    b.input("x", DType::i64, {3, 4}).output("out", DType::i64);
    b.init("y", i64s({3, -4, 7, -1}));
    b.node("Mod", {"x", "y"}, {"out"});
    c.push_back({"Mod fmod=0 on integers", b, {randint(-20, 20, {3, 4})}});
  }
  // Comparisons into Where, and the boolean ops.
  {
    Builder b;
    b.input("x", DType::f32, s).input("y", DType::f32, s).output("out");
    b.node("Less", {"x", "y"}, {"lt"}).node("Greater", {"x", "y"}, {"gt"});
    b.node("Equal", {"x", "x"}, {"eq"}).node("LessOrEqual", {"x", "y"}, {"le"});
    b.node("GreaterOrEqual", {"x", "y"}, {"ge"}).node("Not", {"lt"}, {"nlt"});
    b.node("And", {"nlt", "eq"}, {"a"}).node("Or", {"a", "le"}, {"o"});
    b.node("And", {"o", "ge"}, {"o2"}).node("Or", {"o2", "gt"}, {"cond"});
    b.node("Where", {"cond", "x", "y"}, {"out"});
    c.push_back({"comparisons, Not/And/Or, Where", b, {randn(s), randn(s)}});
  }
  {
    Builder b;
    b.input("x", DType::f32, s).output("out");
    b.init("lo", full({}, -0.5)).init("hi", full({}, 0.7));
    b.node("Clip", {"x", "lo", "hi"}, {"c"}).node("Clip", {"c", "", "hi"}, {"out"});
    c.push_back({"Clip", b, {randn(s)}});
  }
  {
    Builder b;
    b.input("x", DType::f32, s).output("out");
    b.node("Cast", {"x"}, {"d"}, {Attr("to", int64_t{::onnx::TensorProto::DOUBLE})});
    b.node("Cast", {"d"}, {"out"}, {Attr("to", int64_t{::onnx::TensorProto::FLOAT})});
    c.push_back({"Cast", b, {randn(s)}});
  }
  // Products.
  c.push_back({"MatMul batched", one("MatMul", s, {}, {{"w", randn({4, 5})}}), {randn(s)}});
  c.push_back({"Gemm transB + bias (a Linear)",
               one("Gemm", {3, 4}, {Attr("transB", 1)}, {{"w", randn({5, 4})}, {"b", randn({5})}}),
               {randn({3, 4})}});
  c.push_back({"Gemm transA, alpha, beta, 2-d C",
               one("Gemm", {4, 3}, {Attr("transA", 1), Attr("alpha", 0.5f), Attr("beta", 2.0f)},
                   {{"w", randn({4, 5})}, {"c", randn({3, 5})}}),
               {randn({4, 3})}});
  // Rows and reductions.
  c.push_back({"Softmax axis 1", one("Softmax", s, {Attr("axis", 1)}), {randn(s)}});
  c.push_back({"LogSoftmax", one("LogSoftmax", s), {randn(s)}});
  c.push_back({"ReduceMean axes keepdims 0",
               one("ReduceMean", s, {Attr("axes", {1, -1}), Attr("keepdims", 0)}),
               {randn(s)}});
  c.push_back({"ReduceMax", one("ReduceMax", s, {Attr("axes", {0})}), {randn(s)}});
  c.push_back({"ReduceMin all", one("ReduceMin", s, {Attr("keepdims", 0)}), {randn(s)}});
  c.push_back({"ReduceSum axes input", one("ReduceSum", s, {}, {{"axes", i64s({2})}}), {randn(s)}});
  c.push_back({"LayerNormalization",
               one("LayerNormalization", s, {Attr("epsilon", 1e-3f)},
                   {{"g", randn({4})}, {"bias", randn({4})}}),
               {randn(s)}});
  c.push_back({"LayerNormalization axis 1, no bias",
               one("LayerNormalization", s, {Attr("axis", 1)}, {{"g", randn({3, 4})}}),
               {randn(s)}});
  // Layout.
  c.push_back({"Reshape 0 and -1", one("Reshape", s, {}, {{"shape", i64s({0, -1})}}), {randn(s)}});
  c.push_back({"Transpose", one("Transpose", s, {Attr("perm", {2, 0, 1})}), {randn(s)}});
  c.push_back({"Transpose default", one("Transpose", s), {randn(s)}});
  c.push_back({"Flatten axis 2", one("Flatten", s, {Attr("axis", 2)}), {randn(s)}});
  c.push_back({"Unsqueeze", one("Unsqueeze", s, {}, {{"axes", i64s({0, -1})}}), {randn(s)}});
  c.push_back({"Squeeze",
               one("Squeeze", {2, 1, 4, 1}, {}, {{"axes", i64s({1, 3})}}),
               {randn({2, 1, 4, 1})}});
  c.push_back({"Expand", one("Expand", {3, 1}, {}, {{"shape", i64s({2, 1, 4})}}), {randn({3, 1})}});
  c.push_back({"Slice axes, steps, negatives",
               one("Slice", {5, 6}, {},
                   {{"starts", i64s({1, -5})},
                    {"ends", i64s({100, -1})},
                    {"axes", i64s({0, 1})},
                    {"steps", i64s({2, 2})}}),
               {randn({5, 6})}});
  // Backwards: the whole dim reversed (torch.flip), every other from the end, a start past
  // the end clamped, an empty range, and a backward axis beside a forward one.
  for (const auto& [what, starts, ends, steps] :
       std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>,
                              std::vector<int64_t>>>{
           {"reversed", {-1, 0}, {INT64_MIN, 100}, {-1, 1}},
           {"every other backwards", {100, 4}, {-100, 0}, {-2, -3}},
           {"empty backwards", {1, 0}, {3, 6}, {-1, 1}}}) {
    c.push_back({"Slice " + what,
                 one("Slice", {5, 6}, {},
                     {{"starts", i64s(starts)},
                      {"ends", i64s(ends)},
                      {"axes", i64s({0, 1})},
                      {"steps", i64s(steps)}}),
                 {randn({5, 6})}});
  }
  c.push_back({"Split by sizes",
               one("Split", {2, 7}, {Attr("axis", 1)}, {{"split", i64s({3, 4})}}, 2),
               {randn({2, 7})}});
  c.push_back({"Split equal", one("Split", {6, 2}, {}, {}, 3), {randn({6, 2})}});
  {
    Builder b;
    b.input("x", DType::f32, {2, 3}).input("y", DType::f32, {2, 2}).output("out");
    b.init("z", randn({2, 1}));
    b.node("Concat", {"x", "y", "z"}, {"out"}, {Attr("axis", -1)});
    c.push_back({"Concat", b, {randn({2, 3}), randn({2, 2})}});
  }
  // Gathers: embedding rows by token ids, another axis, a scalar index.
  {
    Builder b;
    b.input("ids", DType::i64, {2, 5}).output("out");
    b.init("table", randn({10, 4}));
    b.node("Gather", {"table", "ids"}, {"out"});
    c.push_back({"Gather rows by ids", b, {randint(0, 10, {2, 5})}});
  }
  c.push_back({"Gather axis 1, 2-d indices",
               one("Gather", s, {Attr("axis", 1)}, {{"i", i64s({2, 0, -1, 1}).reshape({2, 2})}}),
               {randn(s)}});
  c.push_back({"Gather scalar index",
               one("Gather", s, {Attr("axis", 2)}, {{"i", i64_scalar(-1)}}),
               {randn(s)}});
  // Shape-derived constants, as exporters write them: the batch and a computed width.
  {
    Builder b;
    b.input("x", DType::f32, {-1, 3, 4}).output("out");
    b.init("zero", i64_scalar(0)).init("axes0", i64s({0})).init("minus1", i64s({-1}));
    b.node("Shape", {"x"}, {"shape"});
    b.node("Gather", {"shape", "zero"}, {"batch"});
    b.node("Unsqueeze", {"batch", "axes0"}, {"batch1"});
    b.node("Concat", {"batch1", "minus1"}, {"target"}, {Attr("axis", 0)});
    b.node("Reshape", {"x", "target"}, {"flat"});
    b.node("Shape", {"flat"}, {"fshape"}, {Attr("start", -1)});
    b.node("ConstantOfShape", {"fshape"}, {"ones"}, {Attr("value", full({1}, 1.0))});
    b.node("Add", {"flat", "ones"}, {"out"});
    c.push_back(
        {"Shape, Gather, Unsqueeze, Concat, Reshape, ConstantOfShape", b, {randn({2, 3, 4})}});
  }
  {
    Builder b;
    b.input("x", DType::f32, {4, 4}).output("out").output("r", DType::i64);
    b.init("k", i64_scalar(1)).init("start", i64_scalar(2)).init("limit", i64_scalar(11));
    b.init("delta", i64_scalar(3));
    b.node("Trilu", {"x", "k"}, {"upper"}).node("Trilu", {"x"}, {"lower"}, {Attr("upper", 0)});
    b.node("Constant", {}, {"c"}, {Attr("value", full({4}, 0.25))});
    b.node("Add", {"upper", "lower"}, {"ul"}).node("Mul", {"ul", "c"}, {"out"});
    b.node("Range", {"start", "limit", "delta"}, {"r"});
    c.push_back({"Trilu, Constant, Range", b, {randn({4, 4})}});
  }
  // Convolutional networks.
  const Shape img{2, 4, 9, 8};
  c.push_back({"Conv 3x3 pad 1 + bias",
               one("Conv", img, {Attr("kernel_shape", {3, 3}), Attr("pads", {1, 1, 1, 1})},
                   {{"w", randn({6, 4, 3, 3})}, {"b", randn({6})}}),
               {randn(img)}});
  c.push_back({"Conv stride 2, asymmetric pads, dilation, groups 2",
               one("Conv", img,
                   {Attr("strides", {2, 1}), Attr("pads", {0, 1, 2, 1}), Attr("dilations", {1, 2}),
                    Attr("group", 2)},
                   {{"w", randn({6, 2, 3, 2})}}),
               {randn(img)}});
  c.push_back({"Conv auto_pad SAME_UPPER stride 2",
               one("Conv", img, {Attr("auto_pad", "SAME_UPPER"), Attr("strides", {2, 2})},
                   {{"w", randn({3, 4, 4, 3})}}),
               {randn(img)}});
  c.push_back({"Conv 1-d",
               one("Conv", {2, 3, 10}, {Attr("pads", {1, 2})}, {{"w", randn({5, 3, 3})}}),
               {randn({2, 3, 10})}});
  c.push_back({"BatchNormalization",
               one("BatchNormalization", img, {Attr("epsilon", 1e-3f)},
                   {{"scale", randn({4})},
                    {"bias", randn({4})},
                    {"mean", randn({4})},
                    {"var", positive({4})}}),
               {randn(img)}});
  c.push_back(
      {"MaxPool 3x3 s2 p1",
       one("MaxPool", img,
           {Attr("kernel_shape", {3, 3}), Attr("strides", {2, 2}), Attr("pads", {1, 1, 1, 1})}),
       {randn(img)}});
  c.push_back({"MaxPool ceil_mode, dilation",
               one("MaxPool", img,
                   {Attr("kernel_shape", {2, 2}), Attr("strides", {2, 2}), Attr("ceil_mode", 1),
                    Attr("dilations", {1, 2})}),
               {randn(img)}});
  c.push_back({"AveragePool pads counted",
               one("AveragePool", img,
                   {Attr("kernel_shape", {3, 3}), Attr("strides", {2, 2}),
                    Attr("pads", {1, 1, 1, 1}), Attr("count_include_pad", 1)}),
               {randn(img)}});
  c.push_back({"AveragePool pads not counted, ceil_mode",
               one("AveragePool", img,
                   {Attr("kernel_shape", {2, 3}), Attr("strides", {2, 2}),
                    Attr("pads", {1, 1, 1, 1}), Attr("ceil_mode", 1)}),
               {randn(img)}});
  c.push_back({"GlobalAveragePool", one("GlobalAveragePool", img), {randn(img)}});
  c.push_back({"GlobalMaxPool", one("GlobalMaxPool", img), {randn(img)}});
  add_newer_cases(c);
  test::onnx_model::add_indexing_cases(c);
  test::onnx_model::add_recurrent_cases(c);
  test::onnx_model::add_resize_cases(c);
  test::onnx_model::add_einsum_cases(c);
  test::onnx_model::add_extra_cases(c);
  test::onnx_model::add_gridsample_cases(c);
  return c;
}

// Every case against ONNX Runtime, eagerly and compiled; every rule has a case.
TEST(OnnxImport, EveryOperatorMatchesOnnxRuntime) {
  const std::string dir = test::test_dir("onnx");
  std::vector<Case> all = cases();
  std::vector<test::onnx_model::OrtJob> jobs;
  std::vector<std::string> models;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string d = dir + "/case" + std::to_string(i);
    std::filesystem::create_directories(d);
    models.push_back(all[i].model.save(d + "/model.onnx"));
    const std::string ort_model =
        all[i].reference ? all[i].reference->save(d + "/reference.onnx") : models.back();
    jobs.push_back({ort_model, all[i].inputs, d});
  }
  std::string why;
  auto reference = test::onnx_model::run_ort(jobs, dir, &why);
  if (reference.empty()) GTEST_SKIP() << "ONNX Runtime cannot run here: " << why;
  std::set<std::string> covered;
  NoGradGuard no_grad;
  for (size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(all[i].what);
    auto model = onnx::load(models[i]);
    for (const auto& n : all[i].model.proto().graph().node()) covered.insert(n.op_type());
    const std::vector<Tensor> eager = (*model)(all[i].inputs);
    const std::vector<Tensor> compiled = compile(model)(all[i].inputs);
    ASSERT_EQ(reference[i].size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) {
      const Tensor& ref = reference[i][k];
      ASSERT_EQ(eager[k].shape(), ref.shape()) << "output " << k;
      EXPECT_EQ(eager[k].dtype(), ref.dtype()) << "output " << k;
      const double tol = all[i].tol;
      EXPECT_TRUE(allclose(eager[k].to(DType::f64), ref.to(DType::f64), tol, tol)) << "eager " << k;
      EXPECT_TRUE(allclose(compiled[k].to(DType::f64), ref.to(DType::f64), tol, tol))
          << "compiled " << k;
    }
  }
  for (const std::string& op : onnx::supported_ops()) {
    if (op != "Gelu") {
      EXPECT_TRUE(covered.count(op)) << "no case for " << op;
    }
  }
}

// Gelu is opset 20's (ONNX Runtime reads it there only): against zc's own.
TEST(OnnxImport, GeluIsZcsGelu) {
  Tensor x = randn({3, 5});
  for (const char* approx : {"none", "tanh"}) {
    Builder b = one("Gelu", {3, 5}, {Attr("approximate", approx)});
    auto m = onnx::load_from_bytes(
        std::span(reinterpret_cast<const uint8_t*>(b.bytes().data()), b.bytes().size()));
    GeluApprox a = std::string(approx) == "tanh" ? GeluApprox::tanh : GeluApprox::none;
    EXPECT_TRUE(allclose((*m)(x), gelu(x, a), 1e-6, 1e-6));
  }
}

std::shared_ptr<onnx::Model> from(const std::string& bytes) {
  return onnx::load_from_bytes(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "test model");
}

TEST(OnnxImport, MalformedFilesAreErrorsNamingTheCause) {
  Builder ok = one("Relu", {2, 3});
  const std::string bytes = ok.bytes();
  test::expect_error_containing([&] { from(bytes.substr(0, bytes.size() / 2)); },
                                "not an ONNX model");
  test::expect_error_containing([&] { from("\x89PNG\r\n\x1a\n but not a model"); },
                                "not an ONNX model");
  test::expect_error_containing([&] { from(""); }, "not an ONNX model");
  test::expect_error_containing([&] { onnx::load("/nonexistent/model.onnx"); }, "cannot read");
  {
    Builder b;
    b.input("x", DType::f32, {2}).output("out");
    b.node("Relu", {"x", "b"}, {"a"}, {}, "first").node("Relu", {"a"}, {"b"}, {}, "second");
    b.node("Relu", {"a"}, {"out"});
    test::expect_error_containing([&] { from(b.bytes()); }, "form a cycle");
  }
  {
    Builder b;
    b.input("x", DType::f32, {2, 3}).output("out");
    b.node("MatMul", {"x", "weight"}, {"out"}, {}, "proj");
    test::expect_error_containing([&] { from(b.bytes()); },
                                  "node 'proj' (MatMul) reads 'weight', which no node");
  }
  {
    Builder b(11);
    b.input("x", DType::f32, {2}).output("out").node("Relu", {"x"}, {"out"});
    test::expect_error_containing([&] { from(b.bytes()); }, "opset 11 of the default domain");
  }
  {
    Builder b;
    b.input("x", DType::f32, {2}).output("out");
    b.node("Relu", {"x"}, {"a"}).node("Relu", {"x"}, {"a"});
    b.node("Relu", {"a"}, {"out"});
    test::expect_error_containing([&] { from(b.bytes()); }, "'a' is defined twice");
  }
  {
    Builder b = one("Relu", {2});
    b.init("bad", randn({3}));
    b.proto().mutable_graph()->mutable_initializer(0)->set_raw_data("xyz");
    test::expect_error_containing([&] { from(b.bytes()); }, "raw_data has 3 bytes");
  }
  // A shape mismatch: found at the first call, naming the node.
  {
    Builder b = one("Add", {2, 3}, {}, {{"y", randn({4})}});
    auto m = from(b.bytes());
    test::expect_error_containing(
        [&] {
          (*m)(std::vector<Tensor>{randn({2, 3})});
        },
        "ONNX node 'Add_1' (Add)");
    test::expect_error_containing(
        [&] {
          compile(m)(std::vector<Tensor>{randn({2, 3})});
        },
        "ONNX node 'Add_1' (Add)");
  }
  // Inputs that do not fit the declared ones.
  {
    auto m = from(one("Relu", {2, 3}).bytes());
    test::expect_error_containing(
        [&] {
          (*m)(std::vector<Tensor>{randn({2, 4})});
        },
        "input 0 'x' is f32 [2,4], the graph expects f32 [2,3]");
    test::expect_error_containing(
        [&] {
          (*m)(std::vector<Tensor>{randn({2, 3}).to(DType::f64)});
        },
        "the graph expects f32");
  }
}

TEST(OnnxImport, EveryUnsupportedNodeIsListedInOneError) {
  Builder b;
  b.input("x", DType::f32, {2, 3}).output("out");
  b.node("Loop", {"x"}, {"a"}, {}, "loop");
  b.node("Relu", {"a"}, {"r"}, {Attr("alpha", 0.1f)}, "leaky");
  b.node("NonMaxSuppression", {"r"}, {"out"}, {}, "nms");
  const std::string msg = test::error_message([&] { from(b.bytes()); });
  EXPECT_TRUE(test::contains(msg, "3 node(s) zc does not support")) << msg;
  EXPECT_TRUE(test::contains(msg, "'loop' (Loop): operator Loop is not supported")) << msg;
  EXPECT_TRUE(test::contains(msg, "'leaky' (Relu): attribute(s) alpha not supported")) << msg;
  EXPECT_TRUE(test::contains(msg, "'nms' (NonMaxSuppression)")) << msg;
}

// What the recurrent operators' rules refuse at the call: sequences shorter than the input
// (sequence_lens), activations ONNX does not define, activations without their values.
TEST(OnnxImport, RecurrentValuesZcRefusesAreErrorsNamingTheNode) {
  const Shape x{3, 2, 4};  // [seq, batch, input]
  const int64_t hidden = 5;
  const Tensor w = randn({1, 4 * hidden, 4}), r = randn({1, 4 * hidden, hidden});
  auto lstm = [&](std::vector<Attr> attrs, Tensor lens) {
    attrs.push_back(Attr("hidden_size", hidden));
    Builder b;
    b.input("x", DType::f32, x).output("y");
    b.init("W", w).init("R", r);
    std::vector<std::string> in{"x", "W", "R"};
    if (lens.defined()) {
      b.init("lens", lens);
      in.insert(in.end(), {"", "lens"});
    }
    b.node("LSTM", in, {"y"}, std::move(attrs), "rnn");
    return from(b.bytes());
  };
  const std::vector<Tensor> in{randn(x)};
  test::expect_error_containing(
      [&] {
        (*lstm({}, i64s({3, 2}).to(DType::i32)))(in);
      },
      "ONNX node 'rnn' (LSTM): sequence_lens holds 2, zc supports only sequences of the "
      "input's full length 3");
  test::expect_error_containing(
      [&] {
        (*lstm({Attr("activations", std::vector<std::string>{"Sigmoid", "Gelu", "Tanh"})},
               Tensor()))(in);
      },
      "ONNX node 'rnn' (LSTM): activation 'Gelu' is not supported");
  test::expect_error_containing(
      [&] {
        (*lstm({Attr("activations", std::vector<std::string>{"Sigmoid", "Tanh"})}, Tensor()))(in);
      },
      "ONNX node 'rnn' (LSTM): activations lists 2 function(s); LSTM takes 3 per direction");
  test::expect_error_containing(
      [&] {
        (*lstm({Attr("activations", std::vector<std::string>{"Sigmoid", "Affine", "Tanh"})},
               Tensor()))(in);
      },
      "ONNX node 'rnn' (LSTM): activation Affine has no default alpha and beta");
  // Lengths all equal to the input's are the same as none.
  EXPECT_TRUE(
      allclose((*lstm({}, i64s({3, 3}).to(DType::i32)))(in)[0], (*lstm({}, Tensor()))(in)[0]));
}

// A local function of the model: inputs, outputs, an attribute with its default, the nodes.
::onnx::FunctionProto* add_function(::onnx::ModelProto& m, const std::string& name,
                                    std::vector<std::string> in, std::vector<std::string> out) {
  auto* f = m.add_functions();
  f->set_name(name);
  f->set_domain("pkg.zc");
  for (auto& i : in) f->add_input(i);
  for (auto& o : out) f->add_output(o);
  f->add_opset_import()->set_version(19);
  auto* own = f->add_opset_import();  // for the calls of the other functions
  own->set_domain("pkg.zc");
  own->set_version(1);
  return f;
}

::onnx::NodeProto* add_node(::onnx::FunctionProto* f, const std::string& op,
                            std::vector<std::string> in, std::vector<std::string> out,
                            const std::string& domain = "") {
  auto* n = f->add_node();
  n->set_op_type(op);
  n->set_domain(domain);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

// An attribute with its default value (FunctionProto.attribute_proto, field 11, which Debian's
// onnx library predates: written as the bytes of that field then).
void add_default(::onnx::FunctionProto* f, const ::onnx::AttributeProto& a) {
  const auto* reflection = f->GetReflection();
  if (const auto* field = f->GetDescriptor()->FindFieldByName("attribute_proto")) {
    reflection->AddMessage(f, field)->CopyFrom(a);
  } else {
    reflection->MutableUnknownFields(f)->AddLengthDelimited(11, a.SerializeAsString());
  }
}

// An attribute that takes the calling node's value of `ref`.
void add_ref(::onnx::NodeProto* n, const std::string& name, const std::string& ref) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_ref_attr_name(ref);
  a->set_type(::onnx::AttributeProto::FLOAT);
}

// torch's dynamo exporter writes modules as local functions of their own domain: they are
// inlined, each call with its own values and attributes, a function calling another, against
// ONNX Runtime (which runs them as functions).
TEST(OnnxImport, LocalFunctionsAreInlinedAndMatchOnnxRuntime) {
  Builder b(19);
  ::onnx::ModelProto& m = b.proto();
  auto* dom = m.add_opset_import();
  dom->set_domain("pkg.zc");
  dom->set_version(1);
  // Act(a) = LeakyRelu(a, alpha), alpha 0.2 unless the call says.
  auto* act = add_function(m, "Act", {"a"}, {"b"});
  ::onnx::AttributeProto alpha;
  alpha.set_name("alpha");
  alpha.set_type(::onnx::AttributeProto::FLOAT);
  alpha.set_f(0.2f);
  add_default(act, alpha);
  add_ref(add_node(act, "LeakyRelu", {"a"}, {"b"}), "alpha", "alpha");
  // Block(x, w) = Act(x w) + x, passing its own alpha (when its call has one) to Act.
  auto* block = add_function(m, "Block", {"x", "w"}, {"y"});
  block->add_attribute("alpha");
  add_node(block, "MatMul", {"x", "w"}, {"h"});
  add_ref(add_node(block, "Act", {"h"}, {"a"}, "pkg.zc"), "alpha", "alpha");
  add_node(block, "Add", {"a", "x"}, {"y"});
  manual_seed(5);
  b.input("x", DType::f32, {3, 4}).output("out");
  b.init("w1", randn({4, 4})).init("w2", randn({4, 4}));
  b.node("Block", {"x", "w1"}, {"h1"}, {Attr("alpha", 0.05f)}, "first");
  b.node("Block", {"h1", "w2"}, {"out"}, {}, "second");
  m.mutable_graph()->mutable_node(0)->set_domain("pkg.zc");
  m.mutable_graph()->mutable_node(1)->set_domain("pkg.zc");

  const std::string dir = test::test_dir("onnx");
  const Tensor x = randn({3, 4});
  std::vector<test::onnx_model::OrtJob> jobs{{b.save(dir + "/functions.onnx"), {x}, dir}};
  std::string why;
  auto reference = test::onnx_model::run_ort(jobs, dir, &why);
  if (reference.empty()) GTEST_SKIP() << "ONNX Runtime cannot run here: " << why;
  NoGradGuard no_grad;
  auto model = onnx::load(jobs[0].model);
  EXPECT_TRUE(allclose((*model)(x), reference[0][0], 1e-5, 1e-5));
  EXPECT_TRUE(allclose(compile(model)(x), reference[0][0], 1e-5, 1e-5));

  // A function that calls itself cannot be inlined.
  add_node(act, "Act", {"b"}, {"c"}, "pkg.zc");
  test::expect_error_containing([&] { from(b.bytes()); },
                                "local function 'pkg.zc.Act': it calls itself");
}

// Weights stored beside the model (external data, as torch's dynamo exporter writes them):
// read from the file each initializer names, at its offset; a location outside the model's
// folder, a missing file, a range outside the file or of the wrong size raise zc::Error naming
// it, and a model loaded from bytes says that load(path) reads them.
TEST(OnnxImport, ExternalDataIsReadFromBesideTheModel) {
  manual_seed(12);
  const Tensor w = randn({4, 3}), x = randn({2, 4});
  const size_t kWBytes = 12 * sizeof(float);
  Builder b;
  b.input("x", DType::f32, {-1, 4}).output("out");
  b.init("w", w);
  b.node("MatMul", {"x", "w"}, {"out"});
  const std::string dir = test::fresh_dir("onnx", "external-data");
  {  // the weights at offset 16 of w.bin, after bytes that are not theirs
    std::ofstream f(dir + "/w.bin", std::ios::binary);
    f << std::string(16, 'z');
    f.write(static_cast<const char*>(w.raw_data()), static_cast<std::streamsize>(kWBytes));
  }
  auto external = [&](const std::string& location, const std::string& offset,
                      const std::string& length) {
    Builder e = b;
    auto* t = e.proto().mutable_graph()->mutable_initializer(0);
    t->clear_raw_data();
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair{"location", location}, {"offset", offset}, {"length", length}}) {
      if (v.empty()) continue;
      auto* entry = t->add_external_data();
      entry->set_key(k);
      entry->set_value(v);
    }
    return e;
  };
  const std::string n = std::to_string(kWBytes);
  NoGradGuard no_grad;
  auto model = onnx::load(external("w.bin", "16", n).save(dir + "/m.onnx"));
  EXPECT_TRUE(allclose((*model)(std::vector<Tensor>{x})[0], matmul(x, w), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(compile(model)(std::vector<Tensor>{x})[0], matmul(x, w), 1e-6, 1e-6));
  auto fails = [&](const Builder& e, const std::string& part) {
    test::expect_error_containing([&] { onnx::load(e.save(dir + "/bad.onnx")); }, part);
  };
  fails(external("../w.bin", "16", n), "is not a relative path inside the model's folder");
  fails(external("/etc/passwd", "", ""), "is not a relative path inside the model's folder");
  fails(external("", "16", n), "is not a relative path");
  fails(external("missing.bin", "", ""), "cannot be read");
  fails(external("w.bin", "16", "8"), "holds 8 bytes, its dims and type need " + n);
  fails(external("w.bin", "40", n), "lie outside 'w.bin'");
  fails(external("w.bin", "-1", n), "offset '-1' is not a count of bytes");
  fails(external("w.bin", "", ""), "holds " + std::to_string(kWBytes + 16));
  const std::string bytes = external("w.bin", "16", n).bytes();
  test::expect_error_containing(
      [&] {
        onnx::load_from_bytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
      },
      "load the model with zc::onnx::load(path)");
}

// The dims a file leaves symbolic are the module's variable dims, which compile() makes dynamic
// from the first call (one compile serves the other sizes); Dynamic::Static still compiles per
// size.
TEST(OnnxImport, SymbolicDimsAreDynamicWhenCompiled) {
  manual_seed(13);
  Builder b;
  b.input("x", DType::f32, {-1, 6, -1}).output("out");
  b.init("w", randn({6}));
  b.node("Transpose", {"x"}, {"t"}, {Attr("perm", {0, 2, 1})});
  b.node("Mul", {"t", "w"}, {"m"});
  b.node("Softmax", {"m"}, {"out"}, {Attr("axis", -1)});
  auto model = from(b.bytes());
  const std::vector<DynamicDim> dims = model->variable_dims();
  ASSERT_EQ(dims.size(), 2u);
  EXPECT_EQ(dims[0].input, 0u);
  EXPECT_EQ(dims[0].dim, 0);
  EXPECT_EQ(dims[1].dim, 2);
  NoGradGuard no_grad;
  CompiledModule fast = compile(model);
  fast(std::vector<Tensor>{randn({2, 6, 5})});
  const compiler::Stats before = compiler::stats();
  for (const Shape& s : {Shape{3, 6, 5}, Shape{4, 6, 9}, Shape{7, 6, 2}}) {
    const Tensor x = randn(s);
    EXPECT_TRUE(
        allclose(fast(std::vector<Tensor>{x})[0], (*model)(std::vector<Tensor>{x})[0], 1e-5, 1e-6));
  }
  EXPECT_EQ(compiler::stats().compiler_invocations, before.compiler_invocations);
  EXPECT_GE(compiler::stats().template_hits - before.template_hits, 3);
}

// A model on a GPU: the file's constants (a Constant node's vector, an integer index
// initializer, a one-element initializer) and values made from shapes on the CPU
// (ConstantOfShape) meet the activations on the device, eagerly and compiled.
TEST(OnnxImportGpu, ConstantsFollowTheCallsDevice) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(9);
  Builder b;
  b.input("x", DType::f32, {2, 3, 4}).output("out");
  b.init("idx", i64s({3, 0})).init("k", full({1}, 0.5));
  b.node("Constant", {}, {"c"}, {Attr("value", randn({4}))});
  b.node("Add", {"x", "c"}, {"a"});
  b.node("Gather", {"a", "idx"}, {"g"}, {Attr("axis", 2)});
  b.node("Shape", {"g"}, {"shape"});
  b.node("ConstantOfShape", {"shape"}, {"ones"}, {Attr("value", full({1}, 1.0))});
  b.node("Add", {"g", "ones"}, {"h"});
  b.node("Mul", {"h", "k"}, {"out"});
  NoGradGuard no_grad;
  auto model = from(b.bytes());
  const Tensor x = randn({2, 3, 4});
  const Tensor want = (*model)(std::vector<Tensor>{x})[0];
  model->to(Device::cuda(0));
  const Tensor xd = x.to(Device::cuda(0));
  EXPECT_TRUE(allclose((*model)(std::vector<Tensor>{xd})[0].to(Device::cpu()), want, 1e-6, 1e-6));
  EXPECT_TRUE(
      allclose(compile(model)(std::vector<Tensor>{xd})[0].to(Device::cpu()), want, 1e-6, 1e-6));
}

TEST(OnnxImport, AShapeComputedFromInputValuesIsRefused) {
  Builder b;
  b.input("x", DType::f32, {2, 3}).input("s", DType::i64, {2}).output("out");
  b.node("Reshape", {"x", "s"}, {"out"}, {}, "dyn");
  auto m = from(b.bytes());
  // Eagerly every value is known; traced, the shape is the model's input.
  std::vector<Tensor> in{randn({2, 3}), i64s({3, 2})};
  EXPECT_EQ((*m)(in)[0].shape(), (Shape{3, 2}));
  test::expect_error_containing([&] { compile(m)(in); },
                                "the shape is computed from the model's input values");
}

// What Resize and ConvTranspose refuse raises zc::Error naming the node, at the first call:
// linear and cubic of integers, scales and sizes both given, a mode ONNX does not define, sizes
// computed from the input's values when compiled, a 3-d or mis-grouped transposed convolution.
TEST(OnnxImport, ResizeAndConvTransposeRefuseWhatTheyCannotDo) {
  {
    Builder b;
    b.input("x", DType::i32, {1, 2, 3, 4}).output("out", DType::i32);
    b.init("scales", from_vector({1, 1, 2, 2}, {4}));
    b.node("Resize", {"x", "", "scales"}, {"out"}, {Attr("mode", "linear")}, "up");
    expect_refused(b, {randint(0, 9, {1, 2, 3, 4}, DType::i32)},
                   "ONNX node 'up' (Resize): linear and cubic resizes need a floating-point input");
  }
  {
    Builder b;
    b.input("x", DType::f32, {1, 2, 3, 4}).output("out");
    b.init("scales", from_vector({1, 1, 2, 2}, {4})).init("sizes", i64s({1, 2, 6, 8}));
    b.node("Resize", {"x", "", "scales", "sizes"}, {"out"}, {}, "up");
    expect_refused(b, {randn({1, 2, 3, 4})},
                   "ONNX node 'up' (Resize): exactly one of scales and sizes must be given");
  }
  {
    Builder b;
    b.input("x", DType::f32, {1, 2, 3, 4}).output("out");
    b.init("scales", from_vector({1, 1, 2, 2}, {4}));
    b.node("Resize", {"x", "", "scales"}, {"out"}, {Attr("mode", "area")}, "up");
    expect_refused(b, {randn({1, 2, 3, 4})},
                   "ONNX node 'up' (Resize): mode 'area' is not one of nearest, linear, cubic");
  }
  {
    Builder b;
    b.input("x", DType::f32, {1, 2, 3, 4}).input("s", DType::i64, {4}).output("out");
    b.node("Resize", {"x", "", "", "s"}, {"out"}, {}, "up");
    expect_refused(b, {randn({1, 2, 3, 4}), i64s({1, 2, 6, 8})},
                   "ONNX node 'up' (Resize): sizes is computed from the model's input values",
                   true);
  }
  expect_refused(one("ConvTranspose", {1, 2, 3, 4, 5}, {}, {{"w", randn({2, 2, 2, 2, 2})}}),
                 {randn({1, 2, 3, 4, 5})},
                 "ONNX node 'ConvTranspose_1' (ConvTranspose): 3-d transposed convolutions are not "
                 "supported");
  expect_refused(
      one("ConvTranspose", {1, 4, 3, 3}, {Attr("group", 3)}, {{"w", randn({4, 2, 2, 2})}}),
      {randn({1, 4, 3, 3})},
      "ONNX node 'ConvTranspose_1' (ConvTranspose): the weight [4,2,2,2] does not fit 4 input "
      "channels in 3 group(s)");
}

// What Einsum and TopK refuse raises zc::Error naming the node, at the first call: malformed
// equations, labels whose sizes disagree, k past the axis.
TEST(OnnxImport, EinsumAndTopKRefuseWhatTheyCannotDo) {
  auto einsum = [](const std::string& eq, const std::vector<Tensor>& in, const std::string& part) {
    Builder b;
    std::vector<std::string> names;
    for (size_t i = 0; i < in.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      b.input(names.back(), DType::f32, in[i].shape());
    }
    b.output("out").node("Einsum", names, {"out"}, {Attr("equation", eq.c_str())}, "es");
    auto m = from(b.bytes());
    test::expect_error_containing([&] { (*m)(in); }, "ONNX node 'es' (Einsum): " + part);
  };
  const Tensor a = randn({2, 3}), b = randn({3, 4});
  einsum("ij,jk->ik,", {a, b}, "equation 'ij,jk->ik,': term 'ik,' holds something other than");
  einsum("ij.k,jk", {a, b},
         "equation 'ij.k,jk': term 'ij.k' holds something other than letters and one '...'");
  einsum("ij->i->j", {a}, "equation 'ij->i->j' has more than one '->'");
  einsum("ij->i", {a, b}, "equation 'ij->i' has 1 input term(s) for 2 input(s)");
  einsum("ijk,jk", {a, b}, "equation 'ijk,jk': term 0 has 3 label(s) for input 0 of rank 2");
  einsum("ij,jk->iz", {a, b}, "equation 'ij,jk->iz': output label 'z' is in no input term");
  einsum("ij,jk->ii", {a, b}, "equation 'ij,jk->ii': output label 'i' is repeated");
  einsum("ij,kj->ik", {a, b},
         "label 'j' is 3 in input 0 and 4 in input 1 (expected equal sizes, or 1)");
  einsum("ii->i", {a}, "label 'i' is 2 in input 0 and 3 in input 0");
  einsum("ii->i", {randn({1, 3})}, "label 'i' is repeated within one input on dims of 1 and 3");

  Builder t;
  t.input("x", DType::f32, {3, 5}).output("v").output("i", DType::i64);
  t.init("k", i64s({6}));
  t.node("TopK", {"x", "k"}, {"v", "i"}, {}, "top");
  auto m = from(t.bytes());
  const std::vector<Tensor> x{randn({3, 5})};
  const std::string too_large =
      "ONNX node 'top' (TopK): k = 6 for an axis of 5 element(s) (expected 0 to 5)";
  test::expect_error_containing([&] { (*m)(x); }, too_large);
  test::expect_error_containing([&] { compile(m)(x); }, too_large);
}

TEST(OnnxImport, ParametersAreNamedByTheirPathsAndShareAGraph) {
  auto build = [] {
    Builder b;
    b.input("x", DType::f32, {2, 4}).output("out");
    b.init("layer1.0.fc.weight", randn({3, 4})).init("layer1.0.fc.bias", randn({3}));
    b.init("scale", full({}, 2.0));
    b.node("Gemm", {"x", "layer1.0.fc.weight", "layer1.0.fc.bias"}, {"h"}, {Attr("transB", 1)});
    b.node("Mul", {"h", "scale"}, {"out"});
    return b;
  };
  auto a = from(build().bytes()), b = from(build().bytes());
  std::vector<std::string> names;
  for (const auto& [name, t] : a->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"layer1.0.fc.weight", "layer1.0.fc.bias"}));
  EXPECT_EQ(a->inputs().size(), 1u);
  EXPECT_EQ(a->outputs()[0].name, "out");
  EXPECT_EQ(a->opset(), 17);
  // Two files with other weights: one graph, compiled once.
  NoGradGuard no_grad;
  Tensor x = randn({2, 4});
  compiler::reset();
  compiler::reset_stats();
  compile(a)(x);
  compile(b)(x);
  EXPECT_EQ(compiler::stats().code_cache_misses, 1);
  EXPECT_EQ(compiler::stats().code_cache_hits, 1);
}

// A stem and four residual blocks named as torch.onnx.export names nodes: the blocks are
// found as one repeated region, compiled once.
TEST(OnnxImport, RegionsComeFromTheExportersScopeNames) {
  manual_seed(42);
  Builder b;
  b.input("x", DType::f32, {1, 3, 16, 16}).output("out");
  b.init("stem.weight", randn({8, 3, 3, 3}) * 0.3);
  b.node("Conv", {"x", "stem.weight"}, {"h0"}, {Attr("pads", {1, 1, 1, 1})}, "/stem/Conv");
  std::string h = "h0";
  for (int i = 0; i < 4; ++i) {
    const std::string p = "layer1." + std::to_string(i);
    const std::string scope = "/layer1/" + p + "/";
    b.init(p + ".conv1.weight", randn({8, 8, 3, 3}) * 0.2).init(p + ".conv1.bias", randn({8}));
    b.init(p + ".conv2.weight", randn({8, 8, 3, 3}) * 0.2).init(p + ".conv2.bias", randn({8}));
    b.node("Conv", {h, p + ".conv1.weight", p + ".conv1.bias"}, {p + "a"},
           {Attr("pads", {1, 1, 1, 1})}, scope + "conv1/Conv");
    b.node("Relu", {p + "a"}, {p + "b"}, {}, scope + "relu/Relu");
    b.node("Conv", {p + "b", p + ".conv2.weight", p + ".conv2.bias"}, {p + "c"},
           {Attr("pads", {1, 1, 1, 1})}, scope + "conv2/Conv");
    b.node("Add", {p + "c", h}, {p + "d"}, {}, scope + "Add");
    b.node("Relu", {p + "d"}, {p + "out"}, {}, scope + "relu_1/Relu");
    h = p + "out";
  }
  b.node("GlobalAveragePool", {h}, {"out"}, {}, "/avgpool/GlobalAveragePool");
  auto m = from(b.bytes());
  NoGradGuard no_grad;
  Tensor x = randn({1, 3, 16, 16});
  compiler::reset();
  compiler::reset_stats();
  std::vector<Tensor> y = compile(m)(std::vector<Tensor>{x});
  EXPECT_TRUE(allclose(y[0], (*m)(std::vector<Tensor>{x})[0], 1e-4, 1e-4));
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.regions_found, 4);
  EXPECT_EQ(s.region_graphs, 1);
  EXPECT_EQ(s.parts_compiled, 3);  // the stem, the block, the pool
}

// Files exported by torch (tests/tools/export_torch_models.py): a model from outside, end to
// end against ONNX Runtime, eagerly and compiled, on two inputs of other sizes (`input(0)`,
// `input(1)`: its dims are symbolic).
void check_torch_export(const std::string& name, const std::function<Tensor(int64_t)>& input,
                        double tol) {
  const std::string path = std::string(ZC_TEST_SOURCE_DIR) + "/data/onnx/" + name;
  const std::string dir = test::test_dir("onnx-" + name);
  auto model = onnx::load(path);
  EXPECT_TRUE(test::contains(model->producer(), "pytorch")) << model->producer();
  std::vector<test::onnx_model::OrtJob> jobs;
  for (int64_t j : {0, 1}) {
    const std::string d = dir + "/input" + std::to_string(j);
    std::filesystem::create_directories(d);
    jobs.push_back({path, {input(j)}, d});
  }
  std::string why;
  auto reference = test::onnx_model::run_ort(jobs, dir, &why);
  if (reference.empty()) GTEST_SKIP() << "ONNX Runtime cannot run here: " << why;
  NoGradGuard no_grad;
  CompiledModule fast = compile(model);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const std::vector<Tensor> eager = (*model)(jobs[j].inputs);
    const std::vector<Tensor> compiled = fast(jobs[j].inputs);
    ASSERT_EQ(reference[j].size(), 1u);
    EXPECT_EQ(compiled[0].shape(), reference[j][0].shape());
    EXPECT_TRUE(allclose(eager[0], reference[j][0], tol, tol)) << "eager, job " << j;
    EXPECT_TRUE(allclose(compiled[0], reference[j][0], tol, tol)) << "compiled, job " << j;
  }
}

// GPT-2's decoder as its reference code writes it (masked causal attention from a bool buffer,
// Split of the fused QKV, GELU(tanh) as Pow/Tanh, the tied head), at two batch sizes and
// sequence lengths.
TEST(OnnxImport, AGpt2DecoderExportedByTorchMatchesOnnxRuntime) {
  manual_seed(44);
  check_torch_export(
      "gpt2_tiny.onnx",
      [](int64_t j) {
        return randint(0, 100, {1 + 2 * j, 12 + 8 * j});
      },
      1e-4);
}

TEST(OnnxImport, TorchvisionResNet18ExportedByTorchMatchesOnnxRuntime) {
  manual_seed(43);
  check_torch_export(
      "resnet18_w8.onnx",
      [](int64_t j) {
        return randn({1 + 2 * j, 3, 64, 64});
      },
      1e-4);
  // Its blocks are found in the exporter's scopes: layer1's two blocks (the only equal ones of a
  // ResNet-18; every later stage opens with a downsampling block) are one graph.
  auto model = onnx::load(std::string(ZC_TEST_SOURCE_DIR) + "/data/onnx/resnet18_w8.onnx");
  NoGradGuard no_grad;
  compiler::reset();
  compiler::reset_stats();
  compile(model)(std::vector<Tensor>{randn({1, 3, 64, 64})});
  EXPECT_EQ(compiler::stats().regions_found, 2);
  EXPECT_EQ(compiler::stats().region_graphs, 1);
}

}  // namespace
}  // namespace zc

#else

TEST(OnnxImport, NeedsTheOnnxLibrary) {
  EXPECT_FALSE(zc::onnx::available());
  GTEST_SKIP() << "this build has no ONNX import (libonnx-dev and libprotobuf-dev not found)";
}

#endif
