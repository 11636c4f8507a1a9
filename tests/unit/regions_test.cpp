// Regional and automatic hierarchical compilation: a repeated block compiles once.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "capture/capture.h"
#include "runtime/regions/plan.h"
#include "unit/run_model.h"
#include "zc/zc.h"

namespace zc {
namespace {

// A block whose width depends on its instance: Linear(in, out) + ReLU + sigmoid.
struct Wide : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  Wide(int64_t in, int64_t out) {
    lin = register_module("lin", std::make_shared<nn::Linear>(in, out));
  }
  Tensor forward(const Tensor& x) override { return sigmoid(relu((*lin)(x))) * 2.0; }
};

// Layers alternating 10 -> 20 and 20 -> 10.
struct Alternating : nn::Module {
  std::shared_ptr<nn::ModuleList> layers =
      register_module("layers", std::make_shared<nn::ModuleList>());
  explicit Alternating(int n) {
    for (int i = 0; i < n; ++i)
      layers->push_back(std::make_shared<Wide>(i % 2 ? 20 : 10, i % 2 ? 10 : 20));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& l : *layers) h = (*l)(h);
    return h;
  }
};

// Blocks that each hold a Wide, then one more Wide on its own.
struct Residual : nn::Module {
  std::shared_ptr<Wide> inner = register_module("inner", std::make_shared<Wide>(10, 10));
  Tensor forward(const Tensor& x) override { return (*inner)(x) + x; }
};

struct ResidualsThenWide : nn::Module {
  std::shared_ptr<nn::ModuleList> layers =
      register_module("layers", std::make_shared<nn::ModuleList>());
  std::shared_ptr<Wide> last = register_module("last", std::make_shared<Wide>(10, 10));
  ResidualsThenWide() {
    for (int i = 0; i < 4; ++i) layers->push_back(std::make_shared<Residual>());
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& l : *layers) h = (*l)(h);
    return (*last)(h);
  }
};

// seed_model with every layer compiled by hand.
std::shared_ptr<models::SeedModel> manual_seed_model(int n) {
  return std::make_shared<models::SeedModel>(
      n, 10, [](std::shared_ptr<nn::Module> layer) { return compiled(layer); });
}

TEST(Regions, PlanOfSeed64IsOneGluePartAnd64Calls) {
  auto m = models::seed_model(64);
  auto cap = capture::capture_module(*m, randn({10, 10}), nullptr, true);
  runtime::RegionPlan plan = runtime::plan_regions(cap.graph, {});
  EXPECT_EQ(plan.outlined_calls, 64);
  EXPECT_EQ(plan.distinct_blocks, 1);
  ASSERT_EQ(plan.parts.size(), 65u);
  EXPECT_FALSE(plan.parts[0].outlined);  // the outer Linear is not repeated
  for (size_t i = 1; i < plan.parts.size(); ++i) EXPECT_EQ(plan.parts[i].hash, plan.parts[1].hash);
}

TEST(Regions, NothingRepeatedMeansOneGraph) {
  auto lin = std::make_shared<nn::Linear>(4, 4);
  auto cap = capture::capture_module(*lin, randn({2, 4}), nullptr, true);
  runtime::RegionPlan plan = runtime::plan_regions(cap.graph, {});
  EXPECT_EQ(plan.outlined_calls, 0);
  ASSERT_EQ(plan.parts.size(), 1u);
}

TEST(Regions, AutoNoneAndManualMatchEager) {
  manual_seed(21);
  auto seed = models::seed_model(16);
  Tensor x = randn({10, 10});
  Tensor ref = (*seed)(x);
  EXPECT_TRUE(allclose(compile(seed, {.regions = Regions::Auto})(x), ref, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(compile(seed, {.regions = Regions::None})(x), ref, 1e-5, 1e-6));
  manual_seed(21);
  auto manual = manual_seed_model(16);
  Tensor manual_ref = [&] {
    // The same computation eagerly: the wrapped layers hold the weights.
    Tensor h = (*manual->linear)(x);
    for (const auto& l : *manual->layers) h = (*l->named_children()[0].second)(h);
    return h;
  }();
  EXPECT_TRUE(allclose((*manual)(x), manual_ref, 1e-5, 1e-6));

  auto gpt =
      models::gpt({.vocab_size = 97, .block_size = 32, .n_layer = 3, .n_head = 4, .d_model = 32});
  gpt->eval();
  Tensor tokens = randint(0, 97, {2, 16});
  Tensor gref = (*gpt)(tokens);
  EXPECT_TRUE(allclose(compile(gpt, {.regions = Regions::Auto})(tokens), gref, 1e-4, 1e-4));
  EXPECT_TRUE(allclose(compile(gpt, {.regions = Regions::None})(tokens), gref, 1e-4, 1e-4));
}

TEST(Regions, GptBlocksShareOneGraph) {
  auto gpt =
      models::gpt({.vocab_size = 64, .block_size = 16, .n_layer = 4, .n_head = 2, .d_model = 16});
  gpt->eval();
  auto cap = capture::capture_module(*gpt, randint(0, 64, {2, 8}), nullptr, true);
  runtime::RegionPlan plan = runtime::plan_regions(cap.graph, {});
  EXPECT_EQ(plan.outlined_calls, 4);
  EXPECT_EQ(plan.distinct_blocks, 1);
}

// The lone Wide equals the Wide inside every block, but those compile with their blocks: outlining
// it would share nothing, so it stays glue (one graph fewer to compile and load).
TEST(Regions, ARepeatInsideOutlinedBlocksDoesNotOutlineTheLoneCopy) {
  ResidualsThenWide m;
  m.eval();
  auto cap = capture::capture_module(m, randn({3, 10}), nullptr, true);
  runtime::RegionPlan plan = runtime::plan_regions(cap.graph, {});
  EXPECT_EQ(plan.outlined_calls, 4);
  EXPECT_EQ(plan.distinct_blocks, 1);
  ASSERT_EQ(plan.parts.size(), 5u);
  EXPECT_FALSE(plan.parts[4].outlined);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(plan.parts[i].type_name, plan.parts[0].type_name);
  // Two lone Wides do repeat among the free regions: both are outlined.
  struct TwoWides : nn::Module {
    std::shared_ptr<Wide> a = register_module("a", std::make_shared<Wide>(10, 10));
    std::shared_ptr<Wide> b = register_module("b", std::make_shared<Wide>(10, 10));
    Tensor forward(const Tensor& x) override { return (*b)((*a)(x)); }
  } two;
  auto cap2 = capture::capture_module(two, randn({3, 10}), nullptr, true);
  runtime::RegionPlan plan2 = runtime::plan_regions(cap2.graph, {});
  EXPECT_EQ(plan2.outlined_calls, 2);
  EXPECT_EQ(plan2.distinct_blocks, 1);
}

TEST(Regions, AlternatingWidthsCompileExactlyTheDistinctShapes) {
  manual_seed(22);
  auto m = std::make_shared<Alternating>(8);
  Tensor x = randn({4, 10});
  compiler::reset();
  compiler::reset_stats();
  NoGradGuard no_grad;  // inference: parameters want gradients, which would add a backward
  Tensor y = compile(m)(x);
  EXPECT_TRUE(allclose(y, (*m)(x), 1e-5, 1e-6));
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.regions_found, 8);
  EXPECT_EQ(s.region_graphs, 2);
  EXPECT_EQ(s.parts_compiled, 2);
  EXPECT_EQ(s.parts_reused, 6);
}

TEST(Regions, ManualRegionalSharesOneExecutable) {
  compiler::reset();
  compiler::reset_stats();
  auto m = manual_seed_model(64);
  NoGradGuard no_grad;  // inference: parameters want gradients, which would add a backward
  (*m)(randn({10, 10}));
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.graphs_captured, 64);   // each instance captures (microseconds)...
  EXPECT_EQ(s.code_cache_misses, 1);  // ...and one graph is compiled
  EXPECT_EQ(s.code_cache_hits, 63);
}

TEST(Regions, CompilerRunsStayConstantWithDepth) {
  for (int layers : {8, 64, 256}) {
    test::ProcessRun r =
        test::run_model("ZC_FORCE_DISABLE_CACHES=1", "--layers " + std::to_string(layers));
    // The layer and the outer Linear.
    EXPECT_EQ(r.num("compiler", "compiler_invocations"), 2) << layers << " layers:\n" << r.out;
    size_t at = r.out.find("max_diff ");
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_LT(std::stod(r.out.substr(at + 9)), 1e-5) << r.out;
  }
}

}  // namespace
}  // namespace zc
