// Gradients through compiled modules: the backward graph derived from the derivative rules and
// compiled like any graph gives what eager autograd gives, step after step of training.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "codegen/call_buffers.h"
#include "tensor/assign.h"
#include "test_support.h"
#include "unit/run_model.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::contains;
using test::error_message;

models::GPTConfig tiny_gpt() {
  models::GPTConfig cfg{
      .vocab_size = 13, .block_size = 8, .n_layer = 2, .n_head = 2, .d_model = 16};
  return cfg;
}

// Every parameter's gradient from `loss_of(model)` with the model called compiled and eagerly.
template <class Loss>
void expect_same_gradients(const std::shared_ptr<nn::Module>& model, Loss&& loss_of, double tol) {
  CompiledModule fast = compile(model);
  model->zero_grad();
  loss_of([&](const Tensor& x) { return fast(x); }).backward();
  std::vector<Tensor> compiled;
  for (const Tensor& p : model->parameters()) compiled.push_back(p.grad());
  model->zero_grad();
  loss_of([&](const Tensor& x) { return (*model)(x); }).backward();
  auto named = model->named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    ASSERT_TRUE(compiled[i].defined()) << named[i].first;
    EXPECT_TRUE(allclose(compiled[i], named[i].second.grad(), tol, tol)) << named[i].first;
  }
}

// The module called with a list of inputs, eagerly or compiled.
using ModuleCall = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// `grads(call)` (a test's gradients from calls through `call`) with `model` called eagerly, then
// compiled: each within 1e-5. `what` prefixes the failure's "gradient i".
void expect_gradients_match_eager(
    const std::shared_ptr<nn::Module>& model,
    const std::function<std::vector<Tensor>(const ModuleCall&)>& grads, const std::string& what) {
  const std::vector<Tensor> eager =
      grads([&](const std::vector<Tensor>& in) { return (*model)(in); });
  CompiledModule fast = compile(model);
  const std::vector<Tensor> got = grads([&](const std::vector<Tensor>& in) { return fast(in); });
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(allclose(got[i], eager[i], 1e-5, 1e-5)) << what << "gradient " << i;
}

// A training forward's saved values (its outputs after the graph's own) come in one
// allocation: views of one storage, each 64-byte aligned and apart, while the graph's own
// outputs keep storages of their own (a loss the caller keeps pins no activation).
TEST(CompiledTraining, SavedValuesShareOneAllocation) {
  const std::vector<ops::TensorMeta> metas{{{3}, DType::f32, Device::cpu()},
                                           {{5, 3}, DType::f32, Device::cpu()},
                                           {{7}, DType::i64, Device::cpu()},
                                           {{2, 2}, DType::f64, Device::cpu()}};
  std::vector<void*> ptrs;
  const std::vector<Tensor> out = codegen::new_outputs(metas, ptrs, 1);
  ASSERT_EQ(out.size(), 4u);
  const Storage* block = out[1].unsafe_impl()->storage.get();
  EXPECT_NE(out[0].unsafe_impl()->storage.get(), block);
  for (size_t i = 1; i < out.size(); ++i) {
    EXPECT_EQ(out[i].unsafe_impl()->storage.get(), block) << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ptrs[i]) % 64, 0u) << i;
    EXPECT_EQ(out[i].shape(), metas[i].shape);
    EXPECT_EQ(out[i].raw_data(), ptrs[i]);
  }
  // Apart: each filled with its own value keeps it.
  for (size_t i = 0; i < out.size(); ++i) {
    assign_values(out[i], full(metas[i].shape, i + 1.0, metas[i].dtype));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(allclose(out[i].to(DType::f64), full(metas[i].shape, i + 1.0, DType::f64), 0, 0))
        << i;
  }
}

TEST(CompiledTraining, Seed64GradientsEqualEager) {
  manual_seed(51);
  auto model = models::seed_model(64);
  Tensor x = randn({10, 10});
  Tensor target = randn({10, 10});
  expect_same_gradients(
      model, [&](auto call) { return nn::functional::mse_loss(call(x), target); }, 1e-5);
}

TEST(CompiledTraining, GptGradientsEqualEager) {
  manual_seed(52);
  auto model = models::gpt(tiny_gpt());
  Tensor tokens = randint(0, 13, {2, 8});
  Tensor targets = randint(0, 13, {2 * 8});
  expect_same_gradients(
      model,
      [&](auto call) {
        return nn::functional::cross_entropy(call(tokens).reshape({-1, 13}), targets);
      },
      1e-5);
}

// Under an activation-memory budget the backward runs products and attention of the forward
// again instead of reading them saved: the gradients stay the eager ones. A budget outside
// [0, 1] is refused.
TEST(CompiledTraining, ABudgetKeepsTheGradients) {
  manual_seed(53);
  auto model = models::gpt(tiny_gpt());
  Tensor tokens = randint(0, 13, {2, 8});
  Tensor targets = randint(0, 13, {2 * 8});
  auto loss_of = [&](auto call) {
    return nn::functional::cross_entropy(call(tokens).reshape({-1, 13}), targets);
  };
  model->zero_grad();
  loss_of([&](const Tensor& x) { return (*model)(x); }).backward();
  std::vector<Tensor> eager;
  for (const Tensor& p : model->parameters()) eager.push_back(p.grad());
  std::vector<int64_t> saved;  // bytes a call saves for its backward, per budget
  for (double budget : {1.0, 0.5, 0.0}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    CompiledModule fast = compile(model, {.activation_memory_budget = budget});
    model->zero_grad();
    const compiler::Stats before = compiler::stats();
    loss_of([&](const Tensor& x) { return fast(x); }).backward();
    const compiler::Stats after = compiler::stats();
    EXPECT_EQ(after.training_calls - before.training_calls, 1);
    saved.push_back(after.saved_bytes - before.saved_bytes);
    const std::vector<Tensor> params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(params[i].grad().defined()) << i;
      EXPECT_TRUE(allclose(params[i].grad(), eager[i], 1e-5, 1e-5)) << i;
    }
  }
  EXPECT_LT(saved[1], saved[0]);
  EXPECT_LE(saved[2], saved[1]);
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    EXPECT_TRUE(contains(error_message([&] { compile(model, {.activation_memory_budget = bad}); }),
                         "activation_memory_budget must be in [0, 1]"));
  }
}

// The input's own gradient too, and a second backward through a freed call is refused.
TEST(CompiledTraining, InputGradientsAndFreedValues) {
  manual_seed(53);
  auto lin = std::make_shared<nn::Linear>(4, 3);
  CompiledModule fast = compile(lin);
  Tensor x = randn({2, 4}).requires_grad_();
  Tensor y = fast(x);
  EXPECT_EQ(y.grad_fn_name(), "compiled zc::nn::Linear");
  Tensor loss = sum(y * y);
  loss.backward({}, /*retain_graph=*/true);
  Tensor expected = matmul(y.detach() * 2.0, lin->weight.detach());
  EXPECT_TRUE(allclose(x.grad(), expected, 1e-5, 1e-6));
  loss.backward();
  std::string msg = error_message([&] { loss.backward(); });
  EXPECT_TRUE(contains(msg, "second time")) << msg;
  // No gradient wanted: no node.
  NoGradGuard no_grad;
  EXPECT_FALSE(fast(x).requires_grad());
}

// A value returned twice, and an input returned as it is: each gets the sum of its outputs'
// gradients (the backward graph kept only the last output's).
struct Repeats : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  Repeats() { lin = register_module("lin", std::make_shared<nn::Linear>(4, 3)); }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor h = tanh((*lin)(in[0]));
    return {h, in[0], h * 2.0, h, in[0]};
  }
};

TEST(CompiledTraining, AValueReturnedTwiceGetsEveryOutputsGradient) {
  manual_seed(57);
  auto model = std::make_shared<Repeats>();
  const Tensor x0 = randn({5, 4});
  std::vector<Tensor> weights;
  for (int i = 0; i < 5; ++i)
    weights.push_back(randn(i == 1 || i == 4 ? Shape{5, 4} : Shape{5, 3}));
  auto grads = [&](auto call) {
    model->zero_grad();
    Tensor x = x0.clone().requires_grad_();
    std::vector<Tensor> outs = call(std::vector<Tensor>{x});
    Tensor loss = sum(outs[0] * weights[0]);
    for (size_t i = 1; i < outs.size(); ++i) loss = loss + sum(outs[i] * weights[i]);
    loss.backward();
    return std::vector<Tensor>{x.grad(), model->lin->weight.grad(), model->lin->bias.grad()};
  };
  expect_gradients_match_eager(model, grads, "");
}

// Outputs that eager gives no grad_fn (ids, a float made from an integer, a constant's
// multiple, a detached value) do not require gradients compiled either: the backward node
// attached to every floating output, so a loss over them ran a backward eager refuses. And
// x.detach() stops gradients in the compiled backward: the trace recorded no op for it, so
// they flowed through to x.
struct MixedOutputs : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  Tensor table = randn({3, 4});  // a constant of the captured graph
  MixedOutputs() { lin = register_module("lin", std::make_shared<nn::Linear>(4, 3)); }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    return {tanh((*lin)(x)), argmax(x, -1),    cast(cast(x * 2.0, DType::i32), DType::f32),
            table * 2.0,     x.detach() * 3.0, (*lin)(x.detach())};
  }
};

TEST(CompiledTraining, OutputsRequireGradientsWhereEagerOnes) {
  manual_seed(58);
  auto model = std::make_shared<MixedOutputs>();
  const Tensor x0 = randn({5, 4});
  const Tensor xe = x0.clone().requires_grad_(), xc = x0.clone().requires_grad_();
  const std::vector<Tensor> eager = (*model)(std::vector<Tensor>{xe});
  CompiledModule fast = compile(model);
  const std::vector<Tensor> got = fast(std::vector<Tensor>{xc});
  ASSERT_EQ(got.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(got[i].requires_grad(), eager[i].requires_grad()) << "output " << i;
    EXPECT_TRUE(allclose(got[i].detach(), eager[i].detach(), 1e-5, 1e-6)) << "output " << i;
  }
  EXPECT_FALSE(error_message([&] { sum(got[2]).backward(); }).empty());
  sum(got[0] + got[5]).backward();
  const Tensor compiled_grad = model->lin->weight.grad().clone();
  model->zero_grad();
  sum(eager[0] + eager[5]).backward();
  EXPECT_TRUE(allclose(compiled_grad, model->lin->weight.grad(), 1e-5, 1e-6));
  // Through tanh(lin(x)) only: lin(x.detach()) adds nothing to x's gradient.
  EXPECT_TRUE(allclose(xc.grad(), xe.grad(), 1e-5, 1e-6));
}

// A NoGradGuard inside forward(): what it computes carries no gradient compiled either, also
// when the module was first called (so traced) under a NoGradGuard of the caller's.
struct NoGradInside : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  NoGradInside() { lin = register_module("lin", std::make_shared<nn::Linear>(4, 4)); }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor target;
    {
      NoGradGuard no_grad;
      target = tanh((*lin)(in[0])) * 2.0;
    }
    return {sum((*lin)(in[0]) - target), target};
  }
};

TEST(CompiledTraining, ANoGradGuardInsideForwardStopsGradients) {
  manual_seed(59);
  auto model = std::make_shared<NoGradInside>();
  const Tensor x0 = randn({3, 4});
  auto grads = [&](auto call) {
    model->zero_grad();
    Tensor x = x0.clone().requires_grad_();
    std::vector<Tensor> outs = call(std::vector<Tensor>{x});
    EXPECT_FALSE(outs[1].requires_grad());
    outs[0].backward();
    return std::vector<Tensor>{x.grad(), model->lin->weight.grad(), model->lin->bias.grad()};
  };
  const std::vector<Tensor> eager =
      grads([&](const std::vector<Tensor>& in) { return (*model)(in); });
  CompiledModule fast = compile(model);
  {
    NoGradGuard inference;  // the first call traces with gradients off
    (void)fast(std::vector<Tensor>{x0});
  }
  EXPECT_TRUE(GradMode::is_enabled());
  const std::vector<Tensor> got = grads([&](const std::vector<Tensor>& in) { return fast(in); });
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(allclose(got[i], eager[i], 1e-5, 1e-6)) << "gradient " << i;
}

// The same stops inside a block repeated eight times, compiled once (Regions::Auto): each copy's
// detach and NoGradGuard stop its gradients as eagerly.
struct StoppingBlock : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  StoppingBlock() { lin = register_module("lin", std::make_shared<nn::Linear>(6, 6)); }
  Tensor forward(const Tensor& x) override {
    Tensor target;
    {
      NoGradGuard no_grad;
      target = sigmoid((*lin)(x));
    }
    return x + tanh((*lin)(x)) * target - (*lin)(x.detach()) * 0.25;
  }
};

TEST(CompiledTraining, StopsInsideARepeatedBlockHoldInEveryCopy) {
  manual_seed(62);
  auto stack = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 8; ++i) stack->push_back(std::make_shared<StoppingBlock>());
  const Tensor x0 = randn({4, 6});
  auto grads = [&](auto call) {
    stack->zero_grad();
    Tensor x = x0.clone().requires_grad_();
    sum(call(x) * call(x)).backward();
    std::vector<Tensor> g{x.grad()};
    for (const Tensor& p : stack->parameters()) g.push_back(p.grad());
    return g;
  };
  const std::vector<Tensor> eager = grads([&](const Tensor& x) { return (*stack)(x); });
  CompiledModule fast = compile(stack, {.regions = Regions::Auto});
  compiler::reset_stats();
  const std::vector<Tensor> got = grads([&](const Tensor& x) { return fast(x); });
  EXPECT_GT(compiler::stats().parts_reused, 0);
  ASSERT_EQ(got.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(allclose(got[i], eager[i], 1e-4, 1e-5)) << "gradient " << i;
}

// A tensor that wants gradients but is neither an input nor a parameter (a plain member that
// forward() reads, small or large) gets its gradient compiled as eagerly.
struct MemberWithGradient : nn::Module {
  Tensor scale = randn({4}).requires_grad_();
  Tensor big = randn({64, 4}).requires_grad_();
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {tanh(in[0] * scale), matmul(big, in[0].transpose(0, 1))};
  }
};

TEST(CompiledTraining, AMemberTensorThatWantsGradientsGetsThem) {
  manual_seed(60);
  auto model = std::make_shared<MemberWithGradient>();
  const Tensor x = randn({3, 4});
  auto grads = [&](auto call) {
    std::vector<Tensor> outs = call(std::vector<Tensor>{x});
    (sum(outs[0]) + sum(outs[1] * outs[1])).backward();
    std::vector<Tensor> g{model->scale.grad(), model->big.grad()};
    model->scale.mutable_grad() = Tensor();
    model->big.mutable_grad() = Tensor();
    return g;
  };
  expect_gradients_match_eager(model, grads, "");
}

// The same members made to want gradients only after a compiled call traced them as constants
// (the small one embedded, the large one lifted): the next call traces again, and they get
// their gradients as eagerly; calls before the change compiled once.
TEST(CompiledTraining, AMemberThatStartsToWantGradientsGetsThem) {
  manual_seed(62);
  auto model = std::make_shared<MemberWithGradient>();
  model->scale = randn({4});
  model->big = randn({64, 4});
  const Tensor x = randn({3, 4}).requires_grad_();
  CompiledModule fast = compile(model);
  auto loss_of = [&](const std::vector<Tensor>& outs) {
    return sum(outs[0]) + sum(outs[1] * outs[1]);
  };
  loss_of(fast(std::vector<Tensor>{x})).backward();
  EXPECT_FALSE(model->scale.grad().defined());
  const int64_t traced = compiler::stats().graphs_captured;
  loss_of(fast(std::vector<Tensor>{x})).backward();
  EXPECT_EQ(compiler::stats().graphs_captured, traced);
  model->scale.requires_grad_();
  model->big.requires_grad_();
  loss_of(fast(std::vector<Tensor>{x})).backward();
  EXPECT_EQ(compiler::stats().graphs_captured, traced + 1);
  const std::vector<Tensor> got{model->scale.grad(), model->big.grad()};
  model->scale.mutable_grad() = Tensor();
  model->big.mutable_grad() = Tensor();
  loss_of((*model)(std::vector<Tensor>{x})).backward();
  ASSERT_TRUE(got[0].defined() && got[1].defined());
  EXPECT_TRUE(allclose(got[0], model->scale.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(allclose(got[1], model->big.grad(), 1e-5, 1e-5));
}

// Inputs that are views of a leaf that wants gradients (transposed, a strided slice, broadcast
// by expand): the gradient reaches the leaf through each view as eagerly.
TEST(CompiledTraining, InputViewsPassGradientsToTheirLeaf) {
  manual_seed(61);
  auto model = std::make_shared<Repeats>();
  const Tensor base = randn({4, 10});
  const std::vector<std::function<Tensor(const Tensor&)>> views = {
      [](const Tensor& t) { return t.slice(1, 0, 5).transpose(0, 1); },
      [](const Tensor& t) { return t.slice(1, 1, 9, 2); },
      [](const Tensor& t) {
        return t.slice(0, 0, 1).slice(1, 0, 4).expand({5, 4});
      },
  };
  for (size_t v = 0; v < views.size(); ++v) {
    auto grads = [&](auto call) {
      model->zero_grad();
      Tensor leaf = base.clone().requires_grad_();
      std::vector<Tensor> outs = call(std::vector<Tensor>{views[v](leaf)});
      Tensor loss = sum(outs[0] * outs[0]) + sum(outs[1] * 3.0) + sum(outs[2]);
      loss.backward();
      return std::vector<Tensor>{leaf.grad(), model->lin->weight.grad()};
    };
    expect_gradients_match_eager(model, grads, "view " + std::to_string(v) + ", ");
  }
}

// Rounding, sin, cos and the remainders inside a compiled module: the backward graph built from
// their rules (zeros, cos and -sin, -trunc(a / b) and -floor(a / b) for the divisor) gives
// eager autograd's gradients.
struct RoundingTrigRemainders : nn::Module {
  Tensor w, d;
  RoundingTrigRemainders() {
    w = register_parameter("w", randn({3, 4}) * 2.0);
    Tensor r = randn({4});
    d = register_parameter("d", where(gt(r, 0.0), r + 0.25, r - 0.25));  // divisors of either sign
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor x = in[0] * w;
    return {sin(x) * cos(in[0]) + floor(x) + ceil(x) * round(x) + trunc(x) * w + fmod(x, d) +
            remainder(in[0], d)};
  }
};

TEST(CompiledTraining, RoundingTrigAndRemainderGradientsEqualEager) {
  manual_seed(62);
  auto model = std::make_shared<RoundingTrigRemainders>();
  const Tensor x0 = randn({3, 4}) * 3.0, r = randn({3, 4});
  auto grads = [&](auto call) {
    model->zero_grad();
    Tensor x = x0.clone().requires_grad_();
    sum(call(std::vector<Tensor>{x})[0] * r).backward();
    return std::vector<Tensor>{x.grad(), model->w.grad(), model->d.grad()};
  };
  expect_gradients_match_eager(model, grads, "");
}

// 50 AdamW steps on the same data: the compiled loss curve follows the eager one.
TEST(CompiledTraining, AdamWLossCurveFollowsEager) {
  manual_seed(54);
  Tensor tokens = randint(0, 13, {4, 8});
  Tensor targets = randint(0, 13, {4 * 8});
  auto curve = [&](bool compiled) {
    manual_seed(55);
    auto model = models::gpt(tiny_gpt());
    CompiledModule fast = compile(model);
    optim::AdamW opt(model->parameters(), {.lr = 1e-2});
    std::vector<double> losses;
    for (int step = 0; step < 50; ++step) {
      Tensor logits = compiled ? fast(tokens) : (*model)(tokens);
      Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, 13}), targets);
      opt.zero_grad();
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  std::vector<double> eager = curve(false), compiled = curve(true);
  EXPECT_LT(eager.back(), eager.front() * 0.5);
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_NEAR(compiled[i], eager[i], 1e-3 * (1 + std::abs(eager[i]))) << "step " << i;
  }
}

// With Regions::Auto the backward graph is compiled hierarchically too: the forward block and
// its mirror, the block's backward, once each, so a deeper model compiles no more graphs.
TEST(CompiledTraining, CompiledGraphsAreConstantInDepth) {
  auto graphs_for = [](int64_t layers) {
    manual_seed(56);
    auto model = models::seed_model(layers);
    CompiledModule fast = compile(model);
    compiler::reset();
    compiler::reset_stats();
    Tensor loss = nn::functional::mse_loss(fast(randn({10, 10})), randn({10, 10}));
    loss.backward();
    compiler::Stats s = compiler::stats();
    // Forward: the first Linear (glue) and each layer, which also returns the values its
    // backward keeps. Backward: each layer's gradient (recomputing its sigmoid) and the first
    // Linear's (glue).
    EXPECT_EQ(s.parts_reused + s.parts_compiled, 2 * layers + 2) << layers << " layers";
    return s.parts_compiled;
  };
  const int64_t shallow = graphs_for(4);
  EXPECT_EQ(shallow, 4);  // one graph per kind of part above
  EXPECT_EQ(graphs_for(32), shallow);
}

// The whole training step (compiled forward and backward, fused AdamW) in fresh processes:
// cold compiles, warm compiles nothing, derives no backward (runtime/driver/training_graphs.h) and
// loads the backward's graphs by the cold one's hint, and a bundle warms an empty cache; the
// losses agree.
TEST(CompiledTraining, AWarmProcessOrABundleCompilesNothing) {
  const std::string dir = test::fresh_dir("compiled_training", "warm");
  const std::string env = "ZC_CACHE_DIR=" + dir + "/cache";
  const std::string args = "--model seed --layers 16 --steps 3";
  test::ProcessRun cold = test::run_tool("train_step", env, args + " --save " + dir + "/b.zcb");
  ASSERT_EQ(cold.rc, 0) << cold.out;
  EXPECT_GT(std::stoi(cold.lines["compiles"]), 0) << cold.out;
  EXPECT_FALSE(contains(cold.lines["stats"], "\"backwards_derived\":0,")) << cold.out;
  test::ProcessRun warm = test::run_tool("train_step", env, args);
  ASSERT_EQ(warm.rc, 0) << warm.out;
  EXPECT_EQ(warm.lines["compiles"], "0") << warm.out;
  EXPECT_TRUE(contains(warm.lines["stats"], "\"backwards_derived\":0,")) << warm.out;
  // The backward's graphs (the layer's and the glue's) loaded as the cold process's load hint
  // said, before the backward graph was decoded (runtime/records/load_hint.h).
  EXPECT_TRUE(contains(cold.lines["stats"], "\"graphs_preloaded\":0,")) << cold.out;
  EXPECT_TRUE(contains(warm.lines["stats"], "\"graphs_preloaded\":2,")) << warm.out;
  EXPECT_EQ(warm.lines["loss"], cold.lines["loss"]);
  test::ProcessRun bundled = test::run_tool("train_step", "ZC_CACHE_DIR=" + dir + "/empty",
                                            args + " --load " + dir + "/b.zcb");
  ASSERT_EQ(bundled.rc, 0) << bundled.out;
  EXPECT_EQ(bundled.lines["compiles"], "0") << bundled.out;
  EXPECT_TRUE(contains(bundled.lines["stats"], "\"backwards_derived\":0,")) << bundled.out;
  EXPECT_TRUE(contains(bundled.lines["stats"], "\"graphs_preloaded\":2,")) << bundled.out;
  EXPECT_EQ(bundled.lines["loss"], cold.lines["loss"]);
}

// A trace that breaks has no whole graph to differentiate: backward names the module.
TEST(CompiledTraining, AGraphBreakRefusesGradientsNamingTheModule) {
  struct Breaking : nn::Module {
    Tensor w;
    Breaking() { w = register_parameter("w", randn({3})); }
    Tensor forward(const Tensor& x) override {
      Tensor y = x * w;
      return sum(y).item<double>() > 0 ? y : -y;
    }
    std::string type_name() const override { return "Breaking"; }
  };
  CompiledModule fast = compile(std::make_shared<Breaking>());
  Tensor y = fast(randn({3}));
  std::string msg = error_message([&] { sum(y).backward(); });
  EXPECT_TRUE(contains(msg, "compiled module Breaking")) << msg;
  EXPECT_TRUE(contains(msg, "graph break")) << msg;
}

}  // namespace
}  // namespace zc
