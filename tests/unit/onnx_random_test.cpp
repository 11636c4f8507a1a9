// Random ONNX models against ONNX Runtime: seeded chains of MatMul, Gemm (transposed B, alpha,
// beta, a broadcast C), broadcasting arithmetic, activations, Clip, Softmax on either axis,
// LayerNormalization, reductions kept and subtracted, Transpose, Reshape round trips, Slice
// with steps, Concat, Pow and Where, with intermediate values as outputs; and convolutional
// models (Conv with strides, asymmetric pads, dilations and groups, BatchNormalization, pools
// with ceil_mode, residual Adds, a Gemm head). zc's import, run eagerly and compiled, must give
// ONNX Runtime's outputs: the importer's reading of each operator's attributes and
// broadcasting is checked against an implementation that is not zc's.
// ZC_RANDOM_PROGRAMS_SCALE=N walks N times as many.
#include <gtest/gtest.h>

#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
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

// Unique names in a model being built: values (v0, v1, ...) and initializers (w2, ...).
struct FreshNames {
  Builder& b;
  int next = 0;
  std::string value() { return "v" + std::to_string(next++); }
  std::string init(const Tensor& t) {
    const std::string n = "w" + std::to_string(next++);
    b.init(n, t);
    return n;
  }
};

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
    FreshNames fresh{b};
    auto name = [&] { return fresh.value(); };
    auto init = [&](const Tensor& t) { return fresh.init(t); };
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

// One convolutional model: input x of [batch, channels, side, side]; Conv (kernels 1-3, strides,
// symmetric or asymmetric pads, dilations, groups), BatchNormalization, Relu, MaxPool and
// AveragePool (pads, ceil_mode, pads counted or not), residual Adds, then GlobalAveragePool,
// Flatten and a Gemm head.
struct RandomConvModel {
  Builder b;
  std::vector<Tensor> inputs;
  std::string what;

  RandomConvModel(uint32_t seed, int64_t batch, int64_t channels, int64_t side) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    b.input("x", DType::f32, {batch, channels, side, side});
    inputs = {randn({batch, channels, side, side})};
    struct Feature {
      std::string name;
      int64_t c, h, w;
    };
    std::vector<Feature> v{{"x", channels, side, side}};
    FreshNames fresh{b};
    auto name = [&] { return fresh.value(); };
    auto init = [&](const Tensor& t) { return fresh.init(t); };
    // The output size of a window over `in` (ONNX's floor or ceil of the stride steps).
    auto out_size = [](int64_t in, int64_t span, int64_t pads, int64_t stride, bool ceil) {
      const int64_t room = in + pads - span;
      return (ceil ? (room + stride - 1) / stride : room / stride) + 1;
    };
    const int steps = 3 + pick(7);
    for (int s = 0; s < steps; ++s) {
      const Feature f =
          pick(3) ? v.back() : v[static_cast<size_t>(pick(static_cast<int>(v.size())))];
      const std::string out = name();
      Feature g = {out, f.c, f.h, f.w};
      switch (pick(6)) {
        case 0:
        case 1: {
          const int64_t k = pick(2) ? 3 : 1, d = k == 3 && pick(4) == 0 ? 2 : 1;
          const int64_t stride = pick(3) == 0 ? 2 : 1, span = (k - 1) * d + 1;
          int64_t top = pick(2) ? (span - 1) / 2 : 0, left = top, bottom = top, right = top;
          if (pick(4) == 0) bottom = right = top + 1;  // asymmetric
          if (f.h + top + bottom < span || f.w + left + right < span) {
            b.node("Relu", {f.name}, {out});
            what += "Relu ";
            break;
          }
          int64_t group = 1, oc = 1 + pick(12);
          if (pick(4) == 0 && f.c % 2 == 0) {
            group = pick(2) ? f.c : 2;
            oc = group * (1 + pick(2));
          }
          b.node("Conv",
                 {f.name,
                  init(randn({oc, f.c / group, k, k}) *
                       (1.0 / std::sqrt(static_cast<double>(f.c / group * k * k)))),
                  init(randn({oc}) * 0.1)},
                 {out},
                 {Attr("kernel_shape", {k, k}), Attr("strides", {stride, stride}),
                  Attr("pads", {top, left, bottom, right}), Attr("dilations", {d, d}),
                  Attr("group", group)});
          g = {out, oc, out_size(f.h, span, top + bottom, stride, false),
               out_size(f.w, span, left + right, stride, false)};
          what += "Conv(k" + std::to_string(k) + " s" + std::to_string(stride) + " d" +
                  std::to_string(d) + " g" + std::to_string(group) + ") ";
          break;
        }
        case 2:
          b.node("BatchNormalization",
                 {f.name, init(randn({f.c}) * 0.2 + 1.0), init(randn({f.c}) * 0.1),
                  init(randn({f.c}) * 0.1), init(rand({f.c}) + 0.5)},
                 {out}, {Attr("epsilon", 1e-5f)});
          what += "BN ";
          break;
        case 3:
          b.node(pick(2) ? "Relu" : "Sigmoid", {f.name}, {out});
          what += "Act ";
          break;
        case 4: {
          const int64_t k = std::min<int64_t>({2 + pick(2), f.h, f.w});
          const int64_t stride = pick(2) ? 2 : 1, pad = k == 3 && pick(2) ? 1 : 0;
          const bool ceil = pick(3) == 0, max_pool = pick(2);
          std::vector<Attr> attrs{Attr("kernel_shape", {k, k}), Attr("strides", {stride, stride}),
                                  Attr("pads", {pad, pad, pad, pad}),
                                  Attr("ceil_mode", ceil ? 1 : 0)};
          if (!max_pool) attrs.push_back(Attr("count_include_pad", pick(2)));
          b.node(max_pool ? "MaxPool" : "AveragePool", {f.name}, {out}, attrs);
          g = {out, f.c, out_size(f.h, k, 2 * pad, stride, ceil),
               out_size(f.w, k, 2 * pad, stride, ceil)};
          // ONNX (as torch) drops a last window that would start in the padding.
          if (ceil && (g.h - 1) * stride >= f.h + pad) --g.h;
          if (ceil && (g.w - 1) * stride >= f.w + pad) --g.w;
          what += std::string(max_pool ? "MaxPool" : "AvgPool") + (ceil ? "(ceil) " : " ");
          break;
        }
        default: {  // a residual Add with an earlier value of the same shape, else a Relu
          std::string other;
          for (const Feature& e : v)
            if (e.name != f.name && e.c == f.c && e.h == f.h && e.w == f.w) other = e.name;
          if (other.empty()) {
            b.node("Relu", {f.name}, {out});
            what += "Relu ";
          } else {
            b.node("Add", {f.name, other}, {out});
            what += "Add ";
          }
          break;
        }
      }
      v.push_back(g);
    }
    const Feature& last = v.back();
    const std::string pooled = name(), flat = name();
    b.node("GlobalAveragePool", {last.name}, {pooled})
        .node("Flatten", {pooled}, {flat}, {Attr("axis", 1)})
        .node("Gemm", {flat, init(randn({5, last.c}) * 0.3), init(randn({5}))}, {"head"},
              {Attr("transB", 1)});
    b.output(last.name).output("head");
  }
};

// Models `make(seed)` for seeds 1..count (scaled) against ONNX Runtime, eagerly on the CPU and
// compiled for `device` (within `tolerance` of the output's scale).
template <class Make>
void expect_models_match_onnx_runtime(const std::string& name, int count, Make make,
                                      Device device = Device::cpu(), double tolerance = 1e-4) {
  const std::string dir = test::test_dir(name);
  std::vector<std::pair<std::vector<Tensor>, std::string>> models;  // inputs, what
  std::vector<test::onnx_model::OrtJob> jobs;
  for (uint32_t seed = 1; seed <= static_cast<uint32_t>(test::scaled_count(count)); ++seed) {
    manual_seed(seed);
    auto m = make(seed);
    const std::string d = dir + "/model" + std::to_string(seed);
    std::filesystem::create_directories(d);
    jobs.push_back({m.b.save(d + "/model.onnx"), m.inputs, d});
    models.emplace_back(m.inputs, m.what);
  }
  std::string why;
  const auto reference = test::onnx_model::run_ort(jobs, dir, &why);
  if (reference.empty()) GTEST_SKIP() << "ONNX Runtime cannot run here: " << why;
  NoGradGuard no_grad;
  for (size_t i = 0; i < models.size(); ++i) {
    SCOPED_TRACE("seed " + std::to_string(i + 1) + ": " + models[i].second);
    auto model = onnx::load(jobs[i].model);
    std::vector<Tensor> inputs = models[i].first;
    const std::vector<Tensor> eager = (*model)(inputs);
    if (!device.is_cpu()) {
      model->to(device);
      for (Tensor& t : inputs) t = t.to(device);
    }
    const std::vector<Tensor> compiled = test::on_cpu(compile(model)(inputs));
    ASSERT_EQ(reference[i].size(), eager.size());
    ASSERT_EQ(compiled.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) {
      const Tensor& ref = reference[i][k];
      ASSERT_EQ(eager[k].shape(), ref.shape()) << "output " << k;
      EXPECT_LE(test::scaled_error(eager[k], ref), 1e-4) << "eager output " << k;
      EXPECT_LE(test::scaled_error(compiled[k], ref), tolerance) << "compiled output " << k;
    }
  }
}

RandomModel make_model(uint32_t seed) {
  std::mt19937 shape(seed * 7919u);
  const int64_t rows = 1 + static_cast<int64_t>(shape() % 14);
  const int64_t width = 1 + static_cast<int64_t>(shape() % 20);
  return RandomModel(seed, rows, width);
}

RandomConvModel make_conv_model(uint32_t seed) {
  std::mt19937 shape(seed * 7919u);
  const int64_t batch = 1 + static_cast<int64_t>(shape() % 2);
  const int64_t channels = 1 + static_cast<int64_t>(shape() % 8);
  const int64_t side = 5 + static_cast<int64_t>(shape() % 20);
  return RandomConvModel(seed, batch, channels, side);
}

TEST(OnnxRandom, ModelsMatchOnnxRuntime) {
  expect_models_match_onnx_runtime("onnx_random", 40, make_model);
}

TEST(OnnxRandom, ConvolutionalModelsMatchOnnxRuntime) {
  expect_models_match_onnx_runtime("onnx_random_conv", 24, make_conv_model);
}

// The same models compiled for CUDA (its generated kernels, cuBLASLt's products, cuDNN's
// convolutions in TF32 as torch's default for them, docs/adr/0030).
TEST(OnnxRandom, ModelsMatchOnnxRuntimeOnCuda) {
  ZC_SKIP_WITHOUT_GPU();
  expect_models_match_onnx_runtime("onnx_random_cuda", 40, make_model, Device::cuda(0), 1e-3);
  expect_models_match_onnx_runtime("onnx_random_conv_cuda", 24, make_conv_model, Device::cuda(0),
                                   5e-3);
}

}  // namespace
}  // namespace zc

#endif
