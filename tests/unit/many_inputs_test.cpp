// Modules with several inputs and several outputs: the many-input forward, its capture, guards
// per input, regions, graph breaks, training through every output, and the errors of calls
// that do not fit the module.
#include <gtest/gtest.h>

#include "tools/pooled_gpt.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

// Two inputs, three outputs: a product with a bias, and a reduction of the second input.
struct TwoInTwoOut : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  TwoInTwoOut() { lin = register_module("lin", std::make_shared<nn::Linear>(6, 4)); }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor h = relu((*lin)(in[0]));
    Tensor g = sum(in[1] * in[1], {1}, true);  // [B, 1]
    return {h * g, tanh(in[1]) + 1.0};
  }
};

std::vector<Tensor> two_inputs(int64_t batch) {
  return {randn({batch, 6}), randn({batch, 3})};
}

void expect_all_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                      double tol = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].shape(), b[i].shape()) << "output " << i;
    EXPECT_TRUE(allclose(a[i], b[i], tol, tol)) << "output " << i;
  }
}

TEST(ManyInputs, TwoInputsTwoOutputsEqualEagerWithAndWithoutRegions) {
  manual_seed(3);
  test::PooledGPT model(models::gpt_small_config(2));
  auto shared = std::shared_ptr<nn::Module>(&model, [](nn::Module*) {});
  model.eval();
  NoGradGuard no_grad;
  Tensor tokens = randint(0, 1024, {2, 16});
  std::vector<Tensor> in{tokens, test::token_weights(tokens)};
  const std::vector<Tensor> eager = model(in);
  for (Regions regions : {Regions::Auto, Regions::None}) {
    compiler::reset();
    compiler::reset_stats();
    CompileOptions o;
    o.regions = regions;
    CompiledModule fast = compile(shared, o);
    expect_all_close(fast(in), eager, 1e-4);
    expect_all_close(fast(in), eager, 1e-4);  // the guard hit
    compiler::Stats s = compiler::stats();
    EXPECT_EQ(s.graphs_captured, 1);
    EXPECT_EQ(s.guard_hits, 1);
    // The two transformer blocks are still found as one repeated block.
    EXPECT_EQ(s.regions_found, regions == Regions::Auto ? 2 : 0);
  }
}

// Outputs that are an input itself, a parameter, one value twice, or a view.
struct Passthrough : nn::Module {
  Tensor w;
  Passthrough() { w = register_parameter("w", randn({3})); }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor y = in[0] * w;
    return {in[1], y, w, y, y.transpose(0, 1), in[0]};
  }
};

TEST(ManyInputs, OutputsMayBeInputsParametersRepeatsAndViews) {
  manual_seed(4);
  auto model = std::make_shared<Passthrough>();
  NoGradGuard no_grad;
  std::vector<Tensor> in{randn({2, 3}), randn({5})};
  CompiledModule fast = compile(model);
  const std::vector<Tensor> out = fast(in);
  expect_all_close(out, (*model)(in));
  EXPECT_TRUE(allclose(out[0], in[1], 0, 0));
  EXPECT_TRUE(allclose(out[2], model->w, 0, 0));
  EXPECT_TRUE(allclose(out[5], in[0], 0, 0));
  expect_all_close(fast(in), (*model)(in));  // the guard hit
}

TEST(ManyInputs, EachInputIsGuarded) {
  manual_seed(5);
  auto model = std::make_shared<TwoInTwoOut>();
  CompileOptions o;
  o.dynamic = Dynamic::Static;
  CompiledModule fast = compile(model, o);
  NoGradGuard no_grad;
  compiler::reset_stats();
  std::vector<Tensor> in = two_inputs(4);
  expect_all_close(fast(in), (*model)(in));
  std::vector<Tensor> same_kind = two_inputs(4);
  expect_all_close(fast(same_kind), (*model)(same_kind));
  EXPECT_EQ(compiler::stats().recompiles, 0);
  EXPECT_EQ(compiler::stats().guard_hits, 1);
  // A new size of the second input only, then a new dtype of it, then a layout.
  std::vector<Tensor> wider{randn({4, 6}), randn({4, 5})};
  expect_all_close(fast(wider), (*model)(wider));
  EXPECT_EQ(compiler::stats().recompiles, 1);
  std::vector<Tensor> f64{randn({4, 6}), randn({4, 3}).to(DType::f64)};
  expect_all_close(fast(f64), (*model)(f64));
  EXPECT_EQ(compiler::stats().recompiles, 2);
  std::vector<Tensor> strided{randn({4, 6}), randn({3, 4}).transpose(0, 1)};
  expect_all_close(fast(strided), (*model)(strided));
  EXPECT_EQ(compiler::stats().recompiles, 3);
  // Each of them is kept: calling the first again captures nothing.
  const int64_t captured = compiler::stats().graphs_captured;
  expect_all_close(fast(in), (*model)(in));
  EXPECT_EQ(compiler::stats().graphs_captured, captured);
}

// A batch dim shared by both inputs becomes dynamic once, as one symbol.
TEST(ManyInputs, ASharedBatchBecomesDynamicOnce) {
  manual_seed(6);
  auto model = std::make_shared<TwoInTwoOut>();
  CompiledModule fast = compile(model);
  NoGradGuard no_grad;
  compiler::reset();
  compiler::reset_stats();
  for (int64_t batch : {4, 7, 9, 16, 33}) {
    std::vector<Tensor> in = two_inputs(batch);
    expect_all_close(fast(in), (*model)(in));
  }
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.graphs_captured, 5);
  EXPECT_GE(s.size_templates, 1);
  // The second size made the template and ran it, like the three after it.
  EXPECT_EQ(s.template_hits, 4) << s.str();
}

// Gradients reach the parameters and both inputs through both outputs, as in eager.
TEST(ManyInputs, TrainingGradientsFlowFromEveryOutput) {
  manual_seed(7);
  auto model = std::make_shared<TwoInTwoOut>();
  CompiledModule fast = compile(model);
  std::vector<Tensor> in = two_inputs(3);
  auto grads = [&](bool compiled) {
    model->zero_grad();
    Tensor a = in[0].detach().requires_grad_(), b = in[1].detach().requires_grad_();
    std::vector<Tensor> out = compiled ? fast({a, b}) : (*model)(std::vector<Tensor>{a, b});
    (sum(out[0]) + sum(out[1] * out[1])).backward();
    std::vector<Tensor> g{a.grad(), b.grad()};
    for (const Tensor& p : model->parameters()) g.push_back(p.grad());
    return g;
  };
  expect_all_close(grads(true), grads(false), 1e-4);
}

// A repeated block with two inputs and two outputs is found and compiled once.
struct Gate : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  Gate() { lin = register_module("lin", std::make_shared<nn::Linear>(8, 8)); }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor h = (*lin)(in[0]) * sigmoid(in[1]);
    return {h + in[0], in[1] - 0.5};
  }
};
struct Gated : nn::Module {
  std::vector<std::shared_ptr<Gate>> gates;
  Gated() {
    for (int i = 0; i < 4; ++i) {
      gates.push_back(register_module("g" + std::to_string(i), std::make_shared<Gate>()));
    }
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    std::vector<Tensor> s = in;
    for (auto& g : gates) s = (*g)(s);
    return {s[0] + s[1]};
  }
};

TEST(ManyInputs, ARepeatedBlockWithSeveralInputsCompilesOnce) {
  manual_seed(8);
  auto model = std::make_shared<Gated>();
  NoGradGuard no_grad;
  compiler::reset();
  compiler::reset_stats();
  std::vector<Tensor> in{randn({3, 8}), randn({3, 8})};
  expect_all_close(compile(model)(in), (*model)(in));
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.regions_found, 4);
  EXPECT_EQ(s.region_graphs, 1);
  // zc::compiled around the block: its many-input call runs compiled.
  auto block = compiled(model->gates[0]);
  expect_all_close((*block)(in), (*model->gates[0])(in));
}

// Reads a value of its second input: a graph break, run in segments, still equal to eager.
struct ReadsAValue : nn::Module {
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor scaled = in[0] * 2.0;
    const double s = sum(in[1]).item<double>();
    return {scaled + s, in[1] * s};
  }
};

TEST(ManyInputs, AGraphBreakRunsEverySegmentWithItsInputs) {
  auto model = std::make_shared<ReadsAValue>();
  NoGradGuard no_grad;
  CompiledModule fast = compile(model);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({2, 3}), randn({4})};
    expect_all_close(fast(in), (*model)(in));
  }
  CompileOptions strict;
  strict.fullgraph = true;
  test::expect_error_containing(
      [&] {
        compile(model, strict)({randn({2}), randn({2})});
      },
      "fullgraph=true");
}

// One input, two outputs.
struct Split : nn::Module {
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {in[0] + 1.0, in[0] * 2.0};
  }
};
struct OneTensorOnly : nn::Module {
  Tensor forward(const Tensor& x) override { return x + 1.0; }
};
struct Neither : nn::Module {};

TEST(ManyInputs, CallsThatDoNotFitTheModuleAreErrors) {
  NoGradGuard no_grad;
  auto two = std::make_shared<TwoInTwoOut>();
  auto split = std::make_shared<Split>();
  test::expect_error_containing(
      [&] {
        compile(split)(randn({2, 3}));
      },
      "returns 2 tensors; call it with a std::vector<Tensor>");
  // The eager module says the same.
  test::expect_error_containing(
      [&] {
        (*split)(randn({2, 3}));
      },
      "returned 2 tensors; call it with a std::vector<Tensor>");
  std::vector<Tensor> x{randn({2, 3})};
  expect_all_close(compile(split)(x), (*split)(x));
  auto one = std::make_shared<OneTensorOnly>();
  test::expect_error_containing(
      [&] {
        compile(one)({randn({2}), randn({2})});
      },
      "overrides only the one-tensor forward");
  // One tensor in a vector is the one-tensor forward.
  std::vector<Tensor> single{randn({2})};
  expect_all_close(compile(one)(single), {single[0] + 1.0});
  auto neither = std::make_shared<Neither>();
  test::expect_error_containing([&] { compile(neither)(randn({2})); }, "is not implemented");
  test::expect_error_containing([&] { (*neither)(std::vector<Tensor>{randn({2})}); },
                                "is not implemented");
  test::expect_error_containing([&] { compile(two)(std::vector<Tensor>{}); }, "no input tensors");
  test::expect_error_containing(
      [&] {
        compile(two)({randn({2, 6}), Tensor()});
      },
      "input 1 is an undefined Tensor");
  CompileOptions marks;
  marks.dynamic_dims = {{.input = 2, .dim = 0}};
  test::expect_error_containing([&] { compile(two, marks)(two_inputs(2)); },
                                "marks input 2, but the module was called with 2 input(s)");
}

}  // namespace
}  // namespace zc
