// The joint forward+backward graph (lower/autodiff.h): its backward half, interpreted and
// compiled by the C++ backend, gives the gradients eager backward() gives, whole and split
// into forward and backward by the partitioner (lower/partition.h).
#include <gtest/gtest.h>

#include "capture/capture.h"
#include "codegen/backends/eager/interpreter.h"
#include "ir/verifier.h"
#include "lower/autodiff.h"
#include "lower/partition.h"
#include "lower/pipeline.h"
#include "runtime/driver/compile_graph.h"
#include "test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

// Captures `model` on `x`, builds the joint graph for every floating input, runs it with a
// random output gradient `g`, and compares its outputs with eager forward and backward.
void check_model(nn::Module& model, const Tensor& x, double tol, bool compile) {
  capture::Captured cap = capture::capture_module(model, x, nullptr, true);
  const ir::Graph& fwd = cap.graph;
  ASSERT_EQ(fwd.outputs.size(), 1u);
  std::vector<size_t> wrt;
  for (size_t i = 0; i < fwd.inputs.size(); ++i) {
    const Tensor& t = fwd.inputs[i].kind == ir::InputKind::user ? x : cap.bindings[i].tensor;
    if (is_floating(t.dtype())) wrt.push_back(i);
  }
  lower::JointGraph joint = lower::joint_graph(fwd, wrt);
  ir::verify(joint.graph);

  // Eager reference: the same inputs as fresh leaves.
  Tensor y_eager;
  std::vector<Tensor> eager_inputs;
  Tensor g;
  {
    for (size_t i = 0; i < fwd.inputs.size(); ++i) {
      Tensor t = cap.bindings[i].tensor.defined() ? cap.bindings[i].tensor : x;
      eager_inputs.push_back(t);
    }
    for (const auto& p : model.parameters()) p.mutable_grad() = Tensor();
    Tensor xin = is_floating(x.dtype()) ? x.detach().requires_grad_() : x;
    y_eager = model(xin);
    g = randn(y_eager.shape()).to(y_eager.dtype());
    y_eager.backward(g);
    // The input slot of the user tensor gets xin's gradient.
    for (size_t i = 0; i < fwd.inputs.size(); ++i) {
      if (fwd.inputs[i].kind == ir::InputKind::user) eager_inputs[i] = xin;
    }
  }

  std::vector<const Tensor*> args;
  for (size_t i = 0; i < fwd.inputs.size(); ++i) {
    args.push_back(fwd.inputs[i].kind == ir::InputKind::user ? &x : &cap.bindings[i].tensor);
  }
  args.push_back(&g);
  auto check_outputs = [&](const std::vector<Tensor>& outs, const std::string& how) {
    SCOPED_TRACE(how);
    ASSERT_EQ(outs.size(), 1 + std::count(joint.has_grad.begin(), joint.has_grad.end(), true));
    EXPECT_TRUE(allclose(outs[0], y_eager.detach(), tol, tol));
    size_t next = 1;
    for (size_t k = 0; k < wrt.size(); ++k) {
      const Tensor& leaf = eager_inputs[wrt[k]];
      if (!joint.has_grad[k]) {
        EXPECT_FALSE(leaf.grad().defined()) << "input " << wrt[k];
        continue;
      }
      ASSERT_TRUE(leaf.grad().defined()) << "input " << wrt[k];
      EXPECT_TRUE(allclose(outs[next++], leaf.grad(), tol, tol)) << "input " << wrt[k];
    }
  };
  check_outputs(codegen::eager::interpret(joint.graph, args), "interpreted");
  lower::LowerContext ctx;
  ir::Graph lowered = lower::lower(joint.graph, ctx);
  check_outputs(codegen::eager::interpret(lowered, args), "lowered, interpreted");
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  runtime::CompileContext compile_ctx;
  if (compile) {
    check_outputs(runtime::compile_graph(joint.graph, cpp, compile_ctx)->run(args),
                  "compiled (cpp)");
  }

  // Partitioned: the forward returns the saved values, the backward reads them.
  lower::Partition part = lower::partition(fwd, joint);
  ir::verify(part.forward);
  ir::verify(part.backward);
  auto run_partition = [&](auto run) {
    std::vector<const Tensor*> fargs(args.begin(), args.begin() + fwd.inputs.size());
    std::vector<Tensor> f = run(part.forward, fargs);
    std::vector<const Tensor*> bargs = args;
    for (size_t index : part.saved) bargs.push_back(&f.at(index));
    std::vector<Tensor> b = run(part.backward, bargs);
    b.insert(b.begin(), f[0]);
    return b;
  };
  check_outputs(run_partition([](const ir::Graph& g, const std::vector<const Tensor*>& a) {
                  return codegen::eager::interpret(g, a);
                }),
                "partitioned, interpreted");
  if (compile) {
    check_outputs(run_partition([&](const ir::Graph& g, const std::vector<const Tensor*>& a) {
                    return runtime::compile_graph(g, cpp, compile_ctx)->run(a);
                  }),
                  "partitioned, compiled (cpp)");
  }
}

TEST(Autodiff, SeedModelBackwardEqualsEager) {
  manual_seed(41);
  auto model = models::seed_model(3);
  check_model(*model, randn({10, 10}), 1e-4, true);
}

TEST(Autodiff, GptBackwardEqualsEager) {
  manual_seed(42);
  models::GPTConfig cfg{
      .vocab_size = 13, .block_size = 8, .n_layer = 2, .n_head = 2, .d_model = 16};
  auto model = models::gpt(cfg);
  check_model(*model, randint(0, 13, {2, 7}), 1e-4, true);
}

// Every op with a rule, through the programs that cover every op.
TEST(Autodiff, EveryOpProgramBackwardEqualsEager) {
  manual_seed(43);
  struct Fn : nn::Module {
    std::function<Tensor(const Tensor&)> f;
    Tensor w = randn({5, 4}), b = randn({5});
    explicit Fn(std::function<Tensor(const Tensor&)> f) : f(std::move(f)) {
      w = register_parameter("w", w);
      b = register_parameter("b", b);
    }
    Tensor forward(const Tensor& x) override { return f(x) + sum(w) * 0.0 + sum(b) * 0.0; }
  };
  auto programs = std::vector<std::function<Tensor(const Tensor&)>>{
      [](const Tensor& x) { return exp(x) * log(abs(x) + 1.0) - sqrt(abs(x) + 0.5); },
      [](const Tensor& x) { return softmax(x, 1) + log_softmax(x, 0) + layer_norm(x, {4}); },
      [](const Tensor& x) {
        return sum(x.reshape({4, 3}).t().slice(1, 0, 4, 2), {1}, true);
      },
      [](const Tensor& x) { return amax(x, {1}, true) + var(x, {0}) + mean(x) * x; },
      [](const Tensor& x) {
        Tensor q = x.reshape({1, 3, 4});
        return scaled_dot_product_attention(q, q, q, true).reshape({3, 4});
      },
  };
  for (size_t i = 0; i < programs.size(); ++i) {
    SCOPED_TRACE("program " + std::to_string(i));
    Fn m(programs[i]);
    check_model(m, randn({3, 4}), 1e-4, false);
  }
}

TEST(Autodiff, AnOpWithoutARuleOnTheWayRaisesNamingIt) {
  ir::Graph g;
  ops::TensorMeta m{{2, 3}, DType::f32, Device::cpu()};
  ir::ValueId gin = g.add_value(m);
  ir::ValueId idx = g.add_value(ops::TensorMeta{{2}, DType::i64, Device::cpu()});
  g.inputs = {{gin, ir::InputKind::user}, {idx, ir::InputKind::user}};
  ir::ValueId out = g.add_value(ops::TensorMeta{{4, 3}, DType::f32, Device::cpu()}, 0);
  g.nodes.push_back(
      ir::Node{ops::OpId::embedding_backward, ops::ShapeAttrs{{4, 3}}, {gin, idx}, {out}});
  g.outputs = {out};
  std::vector<size_t> wrt{0};
  std::string msg = test::error_message([&] { lower::joint_graph(g, wrt); });
  EXPECT_TRUE(test::contains(msg, "'embedding_backward'")) << msg;
}

}  // namespace
}  // namespace zc
