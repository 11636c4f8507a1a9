// Random ONNX models against ONNX Runtime: seeded chains of MatMul, Gemm (transposed B, alpha,
// beta, a broadcast C), broadcasting arithmetic, activations, Clip, Softmax on either axis,
// LayerNormalization, reductions kept and subtracted, Transpose, Reshape round trips, Slice
// with steps, Concat, Pow and Where, with intermediate values as outputs. zc's import, run
// eagerly and compiled, must give ONNX Runtime's outputs: the importer's reading of each
// operator's attributes and broadcasting is checked against an implementation that is not
// zc's. ZC_RANDOM_PROGRAMS_SCALE=N walks N times as many.
#include <gtest/gtest.h>

#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "unit/onnx_builder.h"
#include "unit/random_programs.h"

namespace zc {
namespace {

using test::onnx_model::Attr;
using test::onnx_model::Builder;

Tensor i64s(std::vector<int64_t> v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i64);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

// One model: inputs x and y of [rows, width]; values are [rows, c] with c varying.
struct RandomModel {
  Builder b;
  std::vector<Tensor> inputs;
  std::string what;

  RandomModel(uint32_t seed, int64_t rows, int64_t width) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    b.input("x", DType::f32, {rows, width}).input("y", DType::f32, {rows, width});
    inputs = {randn({rows, width}), randn({rows, width})};
    b.init("one", full({}, 1.0)).init("half", full({}, 0.5)).init("zero", full({}, 0.0));
    b.init("lo", full({}, -8.0)).init("hi", full({}, 8.0)).init("p15", full({}, 1.5));
    std::vector<std::string> names{"x", "y"};
    std::vector<int64_t> widths{width, width};
    int fresh = 0;
    auto name = [&] { return "v" + std::to_string(fresh++); };
    auto init = [&](const Tensor& t) {
      const std::string n = "w" + std::to_string(fresh++);
      b.init(n, t);
      return n;
    };
    std::vector<std::string> outputs;
    const int steps = 5 + pick(9);
    for (int s = 0; s < steps; ++s) {
      const int nv = static_cast<int>(names.size());
      const int a = pick(3) ? nv - 1 : pick(nv);
      const std::string x = names[static_cast<size_t>(a)];
      const int64_t c = widths[static_cast<size_t>(a)];
      auto same_width = [&] {
        std::vector<int> same;
        for (int i = 0; i < nv; ++i)
          if (widths[static_cast<size_t>(i)] == c) same.push_back(i);
        return names[static_cast<size_t>(
            same[static_cast<size_t>(pick(static_cast<int>(same.size())))])];
      };
      std::string out = name();
      int64_t w = c;
      switch (pick(14)) {
        case 0: {  // MatMul with a weight
          w = 1 + pick(20);
          b.node("MatMul", {x, init(randn({c, w}) * 0.5)}, {out});
          what += "MatMul ";
          break;
        }
        case 1: {  // Gemm: transB, alpha, beta, C broadcast as a row, a column or a scalar
          w = 1 + pick(20);
          const bool tb = pick(2);
          const float alpha = 0.5f + 0.25f * static_cast<float>(pick(4));
          const float beta = 0.5f + 0.5f * static_cast<float>(pick(3));
          const Tensor bias = pick(3) == 0 ? randn({rows, 1}) : pick(2) ? randn({w}) : randn({1});
          b.node("Gemm", {x, init(tb ? randn({w, c}) * 0.5 : randn({c, w}) * 0.5), init(bias)},
                 {out}, {Attr("transB", tb ? 1 : 0), Attr("alpha", alpha), Attr("beta", beta)});
          what += "Gemm ";
          break;
        }
        case 2:
        case 3: {  // arithmetic with a value of the same width, or a broadcast row
          static const char* ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
          const int op = pick(6);
          std::string y = pick(4) == 0 ? init(randn({c})) : same_width();
          if (op == 3) {  // divide by |y| + 1
            const std::string ay = name(), d = name();
            b.node("Abs", {y}, {ay}).node("Add", {ay, "one"}, {d});
            y = d;
          }
          b.node(ops[op], {x, y}, {out});
          what += std::string(ops[op]) + " ";
          break;
        }
        case 4:
        case 5: {
          static const char* ops[] = {"Relu", "Sigmoid", "Tanh", "Erf", "Abs", "Neg"};
          const int op = pick(6);
          b.node(ops[op], {x}, {out});
          what += std::string(ops[op]) + " ";
          break;
        }
        case 6: {  // Exp of a Clip, Sqrt of |x| + 1, or Pow(|x| + 1, 1.5)
          const std::string t = name();
          const int op = pick(3);
          if (op == 0) {
            b.node("Clip", {x, "lo", "hi"}, {t}).node("Exp", {t}, {out});
          } else {
            const std::string t2 = name();
            b.node("Abs", {x}, {t}).node("Add", {t, "one"}, {t2});
            if (op == 1) {
              b.node("Sqrt", {t2}, {out});
            } else {
              b.node("Pow", {t2, "p15"}, {out});
            }
          }
          what += op == 0 ? "Exp(Clip) " : op == 1 ? "Sqrt " : "Pow ";
          break;
        }
        case 7: {  // Softmax over the row or the column
          const int axis = pick(3) == 0 ? 0 : (pick(2) ? -1 : 1);
          b.node("Softmax", {x}, {out}, {Attr("axis", axis)});
          what += "Softmax(" + std::to_string(axis) + ") ";
          break;
        }
        case 8: {
          b.node("LayerNormalization", {x, init(randn({c})), init(randn({c}))}, {out},
                 {Attr("axis", -1), Attr("epsilon", 1e-5f)});
          what += "LayerNorm ";
          break;
        }
        case 9: {  // x - reduce(x) over the row, kept and broadcast back
          const std::string r = name();
          const char* op = pick(2) ? "ReduceMean" : "ReduceMax";
          b.node(op, {x}, {r}, {Attr("axes", {1}), Attr("keepdims", 1)}).node("Sub", {x, r}, {out});
          what += std::string(op) + " ";
          break;
        }
        case 10: {  // tanh(x) (tanh(x)^T tanh(x)) / (c rows): Transpose and two MatMuls
          const std::string t = name(), tt = name(), g = name(), p = name();
          b.node("Tanh", {x}, {t})
              .node("Transpose", {t}, {tt}, {Attr("perm", {1, 0})})
              .node("MatMul", {tt, t}, {g})
              .node("MatMul", {t, g}, {p})
              .node("Mul", {p, init(full({}, 1.0 / static_cast<double>(c * rows)))}, {out});
          what += "Gram ";
          break;
        }
        case 11: {  // a softmax over every element, through Reshape and back
          const std::string f = name(), sm = name();
          b.node("Reshape", {x, init(i64s({1, -1}))}, {f})
              .node("Softmax", {f}, {sm}, {Attr("axis", -1)})
              .node("Reshape", {sm, init(i64s({rows, c}))}, {out});
          what += "FlatSoftmax ";
          break;
        }
        case 12: {  // Slice of the columns, with a step, or Concat with another value
          if (c > 1 && pick(2)) {
            const int64_t start = pick(static_cast<int>(c) - 1), step = 1 + pick(2);
            b.node("Slice",
                   {x, init(i64s({start})), init(i64s({c})), init(i64s({1})), init(i64s({step}))},
                   {out});
            w = (c - start + step - 1) / step;
            what += "Slice ";
          } else {
            const int other = pick(nv);
            b.node("Concat", {x, names[static_cast<size_t>(other)]}, {out}, {Attr("axis", 1)});
            w = c + widths[static_cast<size_t>(other)];
            what += "Concat ";
          }
          break;
        }
        default: {  // Where(x > 0, x, y * 0.5)
          const std::string gt = name(), h = name();
          b.node("Greater", {x, "zero"}, {gt})
              .node("Mul", {same_width(), "half"}, {h})
              .node("Where", {gt, x, h}, {out});
          what += "Where ";
          break;
        }
      }
      names.push_back(out);
      widths.push_back(w);
      if (pick(6) == 0 && std::find(outputs.begin(), outputs.end(), out) == outputs.end())
        outputs.push_back(out);
    }
    if (std::find(outputs.begin(), outputs.end(), names.back()) == outputs.end())
      outputs.push_back(names.back());
    for (const std::string& o : outputs) b.output(o);
  }
};

TEST(OnnxRandom, ModelsMatchOnnxRuntime) {
  const std::string dir = test::test_dir("onnx_random");
  std::vector<RandomModel> models;
  std::vector<test::onnx_model::OrtJob> jobs;
  const uint32_t count = static_cast<uint32_t>(test::scaled_count(40));
  for (uint32_t seed = 1; seed <= count; ++seed) {
    manual_seed(seed);
    std::mt19937 shape(seed * 7919u);
    const int64_t rows = 1 + static_cast<int64_t>(shape() % 14);
    const int64_t width = 1 + static_cast<int64_t>(shape() % 20);
    models.emplace_back(seed, rows, width);
    const std::string d = dir + "/model" + std::to_string(seed);
    std::filesystem::create_directories(d);
    jobs.push_back({models.back().b.save(d + "/model.onnx"), models.back().inputs, d});
  }
  std::string why;
  const auto reference = test::onnx_model::run_ort(jobs, dir, &why);
  if (reference.empty()) GTEST_SKIP() << "ONNX Runtime cannot run here: " << why;
  NoGradGuard no_grad;
  for (size_t i = 0; i < models.size(); ++i) {
    SCOPED_TRACE("seed " + std::to_string(i + 1) + ": " + models[i].what);
    auto model = onnx::load(jobs[i].model);
    const std::vector<Tensor> eager = (*model)(models[i].inputs);
    const std::vector<Tensor> compiled = compile(model)(models[i].inputs);
    ASSERT_EQ(reference[i].size(), eager.size());
    ASSERT_EQ(compiled.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) {
      const Tensor& ref = reference[i][k];
      ASSERT_EQ(eager[k].shape(), ref.shape()) << "output " << k;
      EXPECT_LE(test::scaled_error(eager[k], ref), 1e-4) << "eager output " << k;
      EXPECT_LE(test::scaled_error(compiled[k], ref), 1e-4) << "compiled output " << k;
    }
  }
}

}  // namespace
}  // namespace zc

#endif
