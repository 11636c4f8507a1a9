// Capture: hashing, regions, guards and recompiles, graph breaks, and the interpreter as the
// eager backend of zc::compile.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <functional>
#include <set>

#include "capture/capture.h"
#include "ir/canonical.h"
#include "ir/subgraph.h"
#include "unit/op_programs.h"
#include "unit/run_model.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

ir::Graph capture_graph(nn::Module& m, const Tensor& x) {
  return capture::capture_module(m, x, nullptr, true).graph;
}
std::string hash_of(nn::Module& m, const Tensor& x) {
  return hex(ir::graph_hash(capture_graph(m, x)));
}

TEST(CaptureHash, SameTypeDifferentWeightsSameHash) {
  manual_seed(1);
  auto a = models::seed_model(4);
  manual_seed(2);
  auto b = models::seed_model(4);
  Tensor x = randn({10, 10});
  ASSERT_FALSE(allclose((*a)(x), (*b)(x)));  // the weights really differ
  EXPECT_EQ(hash_of(*a, x), hash_of(*b, x));
}

TEST(CaptureHash, ShapeDtypeAndStructureChangeTheHash) {
  auto m = models::seed_model(4);
  std::string base = hash_of(*m, randn({10, 10}));
  EXPECT_NE(base, hash_of(*m, randn({5, 10})));
  EXPECT_NE(base, hash_of(*m, randn({10, 10}, DType::f64)));
  auto deeper = models::seed_model(5);
  EXPECT_NE(base, hash_of(*deeper, randn({10, 10})));
}

TEST(CaptureHash, SameAcrossProcesses) {
  auto m = models::seed_model(64);
  manual_seed(0);
  std::string here = hash_of(*m, randn({10, 10}));
  for (int run = 0; run < 2; ++run) {
    test::ProcessRun r = test::run_shell(std::string(ZC_TEST_TOOLS_DIR) + "/graph_hash seed64 " +
                                         std::to_string(7 + run));
    EXPECT_EQ(r.rc, 0) << r.out;
    std::string theirs = r.out;
    theirs.erase(theirs.find_last_not_of("\n") + 1);
    EXPECT_EQ(theirs, here) << "run " << run;
  }
}

TEST(CaptureRegions, Seed64Has64LayerRegionsWithOneSubgraphHash) {
  auto m = models::seed_model(64);
  ir::Graph g = capture_graph(*m, randn({10, 10}));
  std::vector<ir::RegionId> top = g.top_regions();
  ASSERT_EQ(top.size(), 65u);
  EXPECT_NE(g.regions[top[0]].type_name.find("Linear"), std::string::npos);
  std::set<std::string> hashes;
  for (size_t i = 1; i < top.size(); ++i) {
    EXPECT_NE(g.regions[top[i]].type_name.find("SeedLayer"), std::string::npos);
    hashes.insert(hex(ir::graph_hash(ir::extract_region(g, top[i]).graph)));
  }
  EXPECT_EQ(hashes.size(), 1u);
  // The outer Linear is a different subgraph.
  EXPECT_EQ(hashes.count(hex(ir::graph_hash(ir::extract_region(g, top[0]).graph))), 0u);
}

TEST(CaptureGuards, ShapeChangeRecompilesOnceThenHits) {
  auto m = models::seed_model(3);
  auto fast = compile(m, {.backend = "eager"});
  compiler::reset_stats();
  Tensor a = randn({10, 10}), b = randn({4, 10});
  fast(a);
  EXPECT_EQ(compiler::stats().graphs_captured, 1);
  fast(a);
  EXPECT_EQ(compiler::stats().graphs_captured, 1);
  fast(b);
  EXPECT_EQ(compiler::stats().graphs_captured, 2);
  EXPECT_EQ(compiler::stats().recompiles, 1);
  fast(b);
  fast(a);  // the old shape is still compiled
  EXPECT_EQ(compiler::stats().graphs_captured, 2);
  EXPECT_EQ(compiler::stats().recompiles, 1);
  EXPECT_EQ(compiler::stats().guard_hits, 3);
}

TEST(CaptureGuards, DtypeContiguityAndTrainModeAreGuarded) {
  auto m = models::seed_model(2);
  auto fast = compile(m, {.backend = "eager"});
  compiler::reset_stats();
  Tensor x = randn({10, 10});
  fast(x);
  fast(x.t());  // non-contiguous
  fast(x.to(DType::f64).to(DType::f32));
  EXPECT_EQ(compiler::stats().graphs_captured, 2);
  m->eval();
  fast(x);
  EXPECT_EQ(compiler::stats().graphs_captured, 3);
}

TEST(CaptureGuards, ANumberAndATensorOfItsValueAreDifferentGuards) {
  // x * f32 tensor: a wrapped f64 number keeps the f32 result, an f64 0-dim tensor makes f64.
  auto m = std::make_shared<test::Fn>(
      [](const Tensor& x) { return x * scalar_tensor(1.5, DType::f32); });
  auto fast = compile(m);
  Tensor number = wrap_scalar(2.5), tensor = scalar_tensor(2.5, DType::f64);
  EXPECT_EQ(fast(number).dtype(), (*m)(number).dtype());
  EXPECT_EQ(fast(tensor).dtype(), (*m)(tensor).dtype());
  EXPECT_NE((*m)(number).dtype(), (*m)(tensor).dtype());
}

TEST(CaptureCompile, CopyOfANumberInputCompiles) {
  auto m = std::make_shared<test::Fn>([](const Tensor& x) { return x.clone() * 2.0; });
  Tensor number = wrap_scalar(2.5);
  Tensor got = compile(m)(number), want = (*m)(number);
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_TRUE(allclose(got, want, 0, 0));
}

TEST(CaptureGuards, WeightUpdatesInPlaceNeedNoRecompile) {
  auto m = models::seed_model(2);
  auto fast = compile(m, {.backend = "eager"});
  Tensor x = randn({10, 10});
  fast(x);
  compiler::reset_stats();
  // Loading new weights keeps the handles: the compiled graph reads the new values.
  for (auto& [name, p] : m->named_parameters()) {
    float* d = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) d[i] *= 0.5f;
  }
  EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-5, 1e-6));
  EXPECT_EQ(compiler::stats().graphs_captured, 0);
}

TEST(CaptureCompile, Seed64AndGptMatchEager) {
  manual_seed(3);
  auto seed = models::seed_model(64);
  Tensor x = randn({10, 10});
  EXPECT_TRUE(allclose(compile(seed, {.backend = "eager"})(x), (*seed)(x), 1e-6, 1e-7));

  auto gpt =
      models::gpt({.vocab_size = 97, .block_size = 32, .n_layer = 2, .n_head = 4, .d_model = 32});
  gpt->eval();
  Tensor tokens = randint(0, 97, {2, 16});
  Tensor ref = (*gpt)(tokens);
  Tensor got = compile(gpt, {.backend = "eager"})(tokens);
  EXPECT_EQ(got.shape(), ref.shape());
  EXPECT_TRUE(allclose(got, ref, 1e-6, 1e-6));
}

TEST(CaptureCompile, UnknownBackendIsAnError) {
  auto m = models::seed_model(1);
  try {
    compile(m, {.backend = "tpu"});
    FAIL() << "expected zc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos);
  }
  EXPECT_THROW(compile(nullptr), Error);
}

// Reads a value mid-forward: a graph break.
struct Breaking : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  Breaking() { lin = register_module("lin", std::make_shared<nn::Linear>(6, 6)); }
  Tensor forward(const Tensor& x) override {
    Tensor y = (*lin)(x);
    double total = sum(y).item<double>();
    Tensor z = total > 0 ? relu(y) : neg(y);
    return z * 3.0 + y;  // y crosses the break
  }
};

TEST(CaptureBreaks, ItemMidForwardGivesTheRightAnswerAndCountsABreak) {
  auto m = std::make_shared<Breaking>();
  auto fast = compile(m, {.backend = "eager"});
  compiler::reset_stats();
  for (int i = 0; i < 4; ++i) {
    Tensor x = randn({3, 6}) * (i % 2 ? -5.0 : 5.0);  // both branches
    EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-6, 1e-6)) << i;
  }
  EXPECT_EQ(compiler::stats().graph_breaks, 4);  // re-traced on every call
}

TEST(CaptureBreaks, FullgraphNamesTheOp) {
  auto m = std::make_shared<Breaking>();
  auto fast = compile(m, {.fullgraph = true, .backend = "eager"});
  try {
    fast(randn({3, 6}));
    FAIL() << "expected zc::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("fullgraph"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'sum'"), std::string::npos) << msg;
  }
  // The parameters are not left marked as traced after the failed capture.
  EXPECT_FALSE(m->lin->weight.is_traced());
  EXPECT_NO_THROW((*m)(randn({3, 6})));
}

TEST(CaptureBreaks, ANumberPassedToForwardStillPromotesLikeOneAfterTheBreak) {
  // wrap_scalar(2.5) is f64 but promotes like a C++ number: times a 0-dim f32 tensor it gives
  // f32. The segment after the break takes the input in anew and must see the same.
  auto m = std::make_shared<test::Fn>([](const Tensor& x) {
    double before = (x + 1.0).item<double>();
    return x * scalar_tensor(before, DType::f32);
  });
  Tensor x = wrap_scalar(2.5);
  Tensor want = (*m)(x);
  ASSERT_EQ(want.dtype(), DType::f32);
  auto fast = compile(m, {.backend = "eager"});
  compiler::reset_stats();
  Tensor got = fast(x);
  EXPECT_EQ(compiler::stats().graph_breaks, 1);
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_TRUE(allclose(got.to(DType::f64), want.to(DType::f64), 1e-6, 1e-6));
}

// Random numbers drawn in forward() would be constants of the graph, the same on every call:
// refused with the factory named, and the module's eval() form compiles.
// What a capture computes on the host when a GPU op's inputs are all constants: up to
// kHostFoldElements made (and as many read from the device; CPU inputs are not read from it).
// CudaCompile.ValuesMadeFromConstantsAtCaptureCompileNothingOfTheirOwn runs it on a GPU.
TEST(CaptureConstants, SmallValuesMadeFromConstantsFoldOnTheHost) {
  capture::Tracer tracer(nullptr, true);
  const ops::OpDef& add = ops::op_def(ops::OpId::add);
  const int64_t most = capture::Tracer::kHostFoldElements;
  const std::vector<Tensor> cpu_inputs{zeros({4}), zeros({4})};
  auto made = [](int64_t n) {
    return std::vector<ops::TensorMeta>{{{n}, DType::f32, Device::cpu()}};
  };
  EXPECT_TRUE(tracer.untraced_on_host(add, cpu_inputs, made(most)));
  EXPECT_FALSE(tracer.untraced_on_host(add, cpu_inputs, made(most + 1)));
  const std::vector<Tensor> large{zeros({most + 1})};
  EXPECT_TRUE(tracer.untraced_on_host(add, large, made(4)));  // on the CPU already: not read
}

TEST(CaptureRandom, ADrawInForwardIsRefusedNamingTheFactory) {
  manual_seed(12);
  const Tensor x = randn({3, 6});
  NoGradGuard no_grad;
  for (const char* factory : {"rand", "randn", "randint"}) {
    auto draws = std::make_shared<test::Fn>([&](const Tensor& t) {
      const std::string f = factory;
      return t + (f == "rand"    ? rand(t.shape())
                  : f == "randn" ? randn(t.shape())
                                 : cast(randint(0, 3, t.shape()), DType::f32));
    });
    const std::string msg = test::error_message([&] { compile(draws)(x); });
    EXPECT_TRUE(test::contains(msg, "zc::" + std::string(factory) + ",") &&
                test::contains(msg, "rand_like"))
        << msg;
  }
}

// One module per op family: compiled through the interpreter it must equal eager, and
// together the cases must exercise every registered op.
using test::Fn;

TEST(CaptureInterpreter, EveryOpMatchesEager) {
  manual_seed(11);
  Tensor w = randn({5, 4}), b = randn({5}), table = randn({7, 4});
  std::vector<test::Program> cases = test::every_op_programs(w, b, table);
  std::set<ops::OpId> seen;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto m = std::make_shared<Fn>(cases[i]);
    Tensor x = randn({3, 4});
    Tensor ref = (*m)(x);
    Tensor got = compile(m, {.backend = "eager"})(x);
    EXPECT_TRUE(allclose(got, ref, 1e-6, 1e-6)) << "case " << i;
    for (const ir::Node& n : capture_graph(*m, x).nodes) seen.insert(n.op);
  }
  for (int i = 0; i < ops::kNumOps; ++i) {
    EXPECT_TRUE(seen.count(static_cast<ops::OpId>(i)))
        << "no case exercises op " << ops::op_def(static_cast<ops::OpId>(i)).name;
  }
}

}  // namespace
}  // namespace zc
