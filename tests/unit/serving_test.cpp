// Serving: async compile, warm-up, the ROI report, and calls from many threads at once (the
// last also built with ThreadSanitizer in CI: tests/threads).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_model.h"
#include "runtime/debug/roi.h"
#include "test_support.h"
#include "threads_case.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::contains;

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  explicit Mlp(int64_t d = 24) {
    a = register_module("a", std::make_shared<nn::Linear>(d, 2 * d));
    b = register_module("b", std::make_shared<nn::Linear>(2 * d, d));
  }
  Tensor forward(const Tensor& x) override { return (*b)(gelu((*a)(x))) + x; }
};

// Reads a value mid-forward: a graph break, which fullgraph refuses.
struct Breaking : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  Breaking() { lin = register_module("lin", std::make_shared<nn::Linear>(6, 6)); }
  Tensor forward(const Tensor& x) override {
    Tensor y = (*lin)(x);
    return sum(y).item<double>() > 0 ? relu(y) : neg(y);
  }
};

TEST(AsyncCompile, CallsRunEagerlyUntilTheCodeIsReadyAndEqualEagerThroughout) {
  NoGradGuard no_grad;
  auto m = std::make_shared<Mlp>();
  auto fast = compile(m, {.async_compile = true});
  compiler::reset_stats();
  std::vector<Tensor> xs = {randn({4, 24}), randn({9, 24}), randn({4, 24})};
  for (int round = 0; round < 3; ++round) {
    for (const Tensor& x : xs) EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-4, 1e-5)) << round;
  }
  fast.wait_for_compiles();
  const int64_t eager = compiler::stats().eager_calls;
  for (const Tensor& x : xs) EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-4, 1e-5));
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.eager_calls, eager);  // all compiled now
  EXPECT_GE(s.guard_hits, 3);
  // One background compile per kind of input, however many calls met it meanwhile (batch 9
  // may compile for every batch size at once, as a dynamic dim).
  EXPECT_GE(s.async_compiles, 1);
  EXPECT_LE(s.async_compiles, 2);
}

TEST(AsyncCompile, AFailedCompileKeepsRunningEagerlyAndIsReported) {
  NoGradGuard no_grad;
  auto m = std::make_shared<Breaking>();
  auto fast = compile(m, {.fullgraph = true, .async_compile = true});
  Tensor x = randn({3, 6});
  EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-5, 1e-6));
  std::string msg = test::error_message([&] { fast.wait_for_compiles(); });
  EXPECT_TRUE(contains(msg, "background compile")) << msg;
  EXPECT_TRUE(contains(msg, "[3,6]")) << msg;
  EXPECT_TRUE(contains(msg, "fullgraph")) << msg;
  compiler::reset_stats();
  EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-5, 1e-6));
  EXPECT_EQ(compiler::stats().eager_calls, 1);
  EXPECT_EQ(compiler::stats().async_compiles, 0);  // not retried
  EXPECT_FALSE(m->lin->weight.is_traced());
}

TEST(AsyncCompile, TrainingCallsGetTheSameGradientsEagerAndCompiled) {
  auto m = std::make_shared<Mlp>(16);
  auto fast = compile(m, {.async_compile = true});
  Tensor x = randn({5, 16});
  auto grads_of = [&](auto&& f) {
    m->zero_grad();
    sum(f(x) * f(x)).backward();
    std::vector<Tensor> g;
    for (auto& p : m->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  std::vector<Tensor> want = grads_of([&](const Tensor& t) { return (*m)(t); });
  std::vector<Tensor> first = grads_of([&](const Tensor& t) { return fast(t); });
  fast.wait_for_compiles();
  compiler::reset_stats();
  std::vector<Tensor> later = grads_of([&](const Tensor& t) { return fast(t); });
  EXPECT_EQ(compiler::stats().eager_calls, 0);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(allclose(first[i], want[i], 1e-4, 1e-5)) << i;
    EXPECT_TRUE(allclose(later[i], want[i], 1e-4, 1e-5)) << i;
  }
}

TEST(AsyncCompile, ACompiledBlockInsideAnEagerRunRunsEagerly) {
  NoGradGuard no_grad;
  auto inner = std::make_shared<Mlp>(8);
  auto outer = std::make_shared<nn::Sequential>();
  outer->push_back(compiled(inner));
  outer->push_back(std::make_shared<nn::ReLU>());
  auto fast = compile(outer, {.async_compile = true});
  Tensor x = randn({2, 8});
  EXPECT_TRUE(allclose(fast(x), relu((*inner)(x)), 1e-4, 1e-5));
  fast.wait_for_compiles();
  EXPECT_TRUE(allclose(fast(x), relu((*inner)(x)), 1e-4, 1e-5));
}

// A C++ compiler for a child process that compiles nothing until `release` exists (answering
// the version probe at once), with the child's cache in the same fresh directory: `env`.
struct HeldBackCompiler {
  std::string dir, release, env;
  HeldBackCompiler() {
    dir = test::test_dir("serving");
    release = dir + "/release";
    const std::string cxx = dir + "/slow-cxx";
    {
      std::ofstream f(cxx);
      f << "#!/bin/sh\n"
        << "case \" $* \" in *\" -o \"*) while [ ! -e '" << release
        << "' ]; do sleep 0.02; done;; esac\n"
        << "exec c++ \"$@\"\n";
    }
    std::filesystem::permissions(cxx, std::filesystem::perms::owner_all);
    env = "ZC_CACHE_DIR=" + dir + "/cache ZC_CXX=" + cxx;
  }
};

// The first call provably returns while the compiler runs: the tool's compiler waits for a file
// that the tool creates only after that call returned. A warm process then runs compiled code
// from its first call.
TEST(AsyncCompile, TheFirstCallNeverWaitsForTheCompilerAndAWarmCacheSwitchesAtOnce) {
  const HeldBackCompiler held;
  test::ProcessRun cold = test::run_tool("async_run", held.env, "--release " + held.release);
  ASSERT_EQ(cold.rc, 0) << cold.out;
  // The first call ran eagerly with no compiler run finished; the second call of the same input
  // started no second compile.
  EXPECT_EQ(cold.num("first", "eager_calls"), 1) << cold.out;
  EXPECT_EQ(cold.num("first", "compiler_invocations"), 0) << cold.out;
  EXPECT_EQ(cold.num("first", "async_compiles"), 1) << cold.out;
  EXPECT_EQ(cold.num("second", "eager_calls"), 2) << cold.out;
  EXPECT_EQ(cold.num("second", "async_compiles"), 1) << cold.out;
  EXPECT_GT(cold.num("ready", "compiler_invocations"), 0) << cold.out;
  EXPECT_EQ(cold.num("ready", "eager_calls"), 2) << cold.out;
  EXPECT_LT(cold.num("max_diff", "value"), 1e-4) << cold.out;

  test::ProcessRun warm = test::run_tool("async_run", held.env, "--release " + held.release);
  ASSERT_EQ(warm.rc, 0) << warm.out;
  EXPECT_EQ(warm.num("first", "eager_calls"), 0) << warm.out;
  EXPECT_EQ(warm.num("first", "compiler_invocations"), 0) << warm.out;
  EXPECT_EQ(warm.num("ready", "compiler_invocations"), 0) << warm.out;
  EXPECT_LT(warm.num("max_diff", "value"), 1e-4) << warm.out;
}

// On a GPU the background compile loads its kernels on a thread of its own, and the eager runs
// meanwhile are the device's eager ops.
TEST(AsyncCompileGpu, CallsEqualEagerBeforeAndAfterTheCodeIsReady) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  auto m = std::make_shared<Mlp>(32);
  m->to(Device::cuda(0));
  auto fast = compile(m, {.async_compile = true});
  std::vector<Tensor> xs = {randn({4, 32}).to(Device::cuda(0)), randn({6, 32}).to(Device::cuda(0))};
  for (int round = 0; round < 2; ++round) {
    for (const Tensor& x : xs) {
      EXPECT_TRUE(allclose(fast(x).to(Device::cpu()), (*m)(x).to(Device::cpu()), 1e-4, 1e-5));
    }
  }
  fast.wait_for_compiles();
  compiler::reset_stats();
  for (const Tensor& x : xs) {
    EXPECT_TRUE(allclose(fast(x).to(Device::cpu()), (*m)(x).to(Device::cpu()), 1e-4, 1e-5));
  }
  EXPECT_EQ(compiler::stats().eager_calls, 0);
  EXPECT_EQ(compiler::stats().guard_hits, 2);
  WarmupReport r = fast.warmup({randn({9, 32}).to(Device::cuda(0))});
  EXPECT_EQ(r.items.size(), 1u);
}

// The module changes (train/eval) while its first compile waits for the compiler, and a call
// sees the change before that compile ends: the compile's code, traced from the old module, is
// dropped instead of served.
TEST(AsyncCompile, ACompileOfAModuleThatChangedMeanwhileIsNotServed) {
  const HeldBackCompiler held;
  test::ProcessRun r =
      test::run_tool("async_run", held.env, "--release " + held.release + " --retrain 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.num("second", "eager_calls"), 2) << r.out;
  // After the first compile ended: its entry was not published, so the next call captured and
  // compiled anew; the seed model's graph is the same in training mode, so that compile came
  // from this process's code cache and the call ran its code at once.
  EXPECT_EQ(r.num("ready", "async_compiles"), 2) << r.out;
  EXPECT_EQ(r.num("ready", "graphs_captured"), 2) << r.out;
  EXPECT_EQ(r.num("ready", "eager_calls"), 2) << r.out;
  EXPECT_EQ(r.num("final", "async_compiles"), 2) << r.out;
  EXPECT_EQ(r.num("final", "guard_hits"), 2) << r.out;
  EXPECT_LT(r.num("max_diff", "value"), 1e-4) << r.out;
}

TEST(Warmup, CompilesEveryListedShapeSoThatCallsCompileNothing) {
  NoGradGuard no_grad;
  auto m = std::make_shared<Mlp>(20);
  auto fast = compile(m, {.dynamic = Dynamic::Static});
  Tensor a = randn({3, 20}), b = randn({7, 20});
  WarmupReport r = fast.warmup({a, b});
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_TRUE(contains(r.items[0].inputs, "[3,20]")) << r.str();
  EXPECT_FALSE(r.items[0].training);
  EXPECT_TRUE(contains(r.str(), "warm-up: 2 calls")) << r.str();
  EXPECT_TRUE(contains(r.json(), "\"items\":[")) << r.json();
  compiler::reset_stats();
  EXPECT_TRUE(allclose(fast(a), (*m)(a), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(fast(b), (*m)(b), 1e-4, 1e-5));
  EXPECT_EQ(compiler::stats().graphs_captured, 0);
  EXPECT_EQ(compiler::stats().guard_hits, 2);
  // Again: nothing left to do.
  WarmupReport again = fast.warmup({a});
  EXPECT_EQ(again.items[0].result, "already compiled") << again.str();
  EXPECT_EQ(again.compiler_runs, 0);
}

TEST(Warmup, ATrainingCallCompilesItsBackwardToo) {
  auto m = std::make_shared<Mlp>(12);
  auto fast = compile(m);
  Tensor x = randn({4, 12});
  WarmupReport r = fast.warmup({x});
  ASSERT_EQ(r.items.size(), 1u);
  EXPECT_TRUE(r.items[0].training) << r.str();
  compiler::reset_stats();
  sum(fast(x)).backward();
  compiler::Stats s = compiler::stats();
  EXPECT_EQ(s.graphs_captured, 0);
  EXPECT_EQ(s.compiler_invocations, 0);
  EXPECT_EQ(s.backwards_derived, 0);
}

// A warm-up's compiler runs are its own: two modules warmed up on two threads at once each
// report what they report warmed up alone, and together what the process counted. (A count
// taken as the difference of the process's counter around each would include the other's.)
TEST(Warmup, TwoModulesWarmedUpAtOnceEachReportTheirOwnCompilerRuns) {
  const std::string env = "ZC_FORCE_DISABLE_CACHES=1";
  test::ProcessRun a = test::run_tool("concurrent_warmup", env, "--which a");
  test::ProcessRun b = test::run_tool("concurrent_warmup", env, "--which b");
  test::ProcessRun both = test::run_tool("concurrent_warmup", env, "--which both");
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_EQ(b.rc, 0) << b.out;
  ASSERT_EQ(both.rc, 0) << both.out;
  const double alone_a = a.num("a", "compiler_runs"), alone_b = b.num("b", "compiler_runs");
  EXPECT_GE(alone_a, 2) << a.out;  // one graph per size
  EXPECT_GE(alone_b, 2) << b.out;
  EXPECT_EQ(both.num("a", "compiler_runs"), alone_a) << both.out;
  EXPECT_EQ(both.num("b", "compiler_runs"), alone_b) << both.out;
  EXPECT_EQ(both.num("total", "compiler_runs"), alone_a + alone_b) << both.out;
}

TEST(Warmup, ManyInputCallsAndBadInputs) {
  NoGradGuard no_grad;
  auto m = std::make_shared<Mlp>(8);
  auto fast = compile(m);
  WarmupReport r = fast.warmup(std::vector<std::vector<Tensor>>{{randn({2, 8})}});
  EXPECT_EQ(r.items.size(), 1u);
  std::string msg = test::error_message([&] { fast.warmup(std::vector<std::vector<Tensor>>{{}}); });
  EXPECT_TRUE(contains(msg, "no input tensors")) << msg;
  msg = test::error_message([&] { fast.warmup({Tensor()}); });
  EXPECT_TRUE(contains(msg, "undefined")) << msg;
}

TEST(Roi, SamplesEagerCallsAndComputesTheBreakEven) {
  NoGradGuard no_grad;
  auto m = std::make_shared<Mlp>(32);
  auto fast = compile(m, {.roi_sampling = true});
  Tensor x = randn({8, 32});
  Tensor want = (*m)(x);
  for (int i = 0; i < 12; ++i) EXPECT_TRUE(allclose(fast(x), want, 1e-4, 1e-5)) << i;
  compiler::Report report = compiler::report();
  ASSERT_FALSE(report.modules.empty());
  const compiler::ModuleRoi& r = report.modules.back();
  EXPECT_TRUE(contains(r.module, "Mlp#")) << r.module;
  EXPECT_EQ(r.compiles, 1);
  EXPECT_GT(r.compile_ms, 0);
  // Call 1 compiled; of the 11 guard hits, the 2nd and the 10th ran eagerly as samples.
  EXPECT_EQ(r.eager_samples, 2);
  EXPECT_EQ(r.eager_calls, 2);
  EXPECT_EQ(r.compiled_calls, 9);
  EXPECT_DOUBLE_EQ(r.gain_ms_per_call, r.eager_ms_per_call - r.compiled_ms_per_call);
  if (r.gain_ms_per_call > 0) {
    EXPECT_EQ(r.break_even_calls,
              static_cast<int64_t>(std::ceil(r.compile_ms / r.gain_ms_per_call)));
  } else {
    EXPECT_EQ(r.break_even_calls, -1);
  }
  EXPECT_TRUE(contains(report.str(), r.module)) << report.str();
  EXPECT_TRUE(contains(report.json(), "\"break_even_calls\":")) << report.json();
}

TEST(Roi, WithoutSamplingEagerIsNotMeasuredButCallsAreCounted) {
  NoGradGuard no_grad;
  auto m = std::make_shared<Mlp>(8);
  auto fast = compile(m);
  Tensor x = randn({2, 8});
  for (int i = 0; i < 5; ++i) fast(x);
  const compiler::ModuleRoi r = compiler::report().modules.back();
  EXPECT_EQ(r.compiled_calls, 4);
  EXPECT_EQ(r.eager_calls, 0);
  EXPECT_EQ(r.break_even_calls, -1);
  EXPECT_TRUE(contains(r.str(), "eager not measured")) << r.str();
}

TEST(Roi, TheGuardsRuleOnMeasuredTimes) {
  // Eager faster than compiled by more than 5%, with 2 eager and 5 compiled calls measured.
  runtime::RoiRecord slow_compiled("A");
  for (int i = 0; i < 5; ++i) slow_compiled.add_compiled_call(2.0);
  slow_compiled.add_eager_call(1.0, true);
  EXPECT_FALSE(slow_compiled.gain_is_negative());  // one sample is not enough
  slow_compiled.add_eager_call(1.2, true);
  EXPECT_TRUE(slow_compiled.gain_is_negative());
  runtime::RoiRecord close("B");
  for (int i = 0; i < 5; ++i) close.add_compiled_call(1.0);
  for (int i = 0; i < 2; ++i) close.add_eager_call(0.97, true);
  EXPECT_FALSE(close.gain_is_negative());
  runtime::RoiRecord fast("C");
  for (int i = 0; i < 4; ++i) fast.add_compiled_call(0.1);
  fast.add_compile(50);
  for (int i = 0; i < 3; ++i) fast.add_eager_call(1.1, true);
  EXPECT_FALSE(fast.gain_is_negative());
  compiler::ModuleRoi r = fast.snapshot();
  EXPECT_DOUBLE_EQ(r.compiled_ms_per_call, 0.1);
  EXPECT_DOUBLE_EQ(r.eager_ms_per_call, 1.1);
  EXPECT_EQ(r.break_even_calls, 50);  // 50 ms / 1.0 ms a call
  EXPECT_NEAR(r.net_ms, 4 * 1.0 - 50, 1e-9);
  // Samples: the 2nd, 10th, 100th... guard hit.
  std::vector<int64_t> samples;
  for (int64_t n = 1; n <= 10000; ++n) {
    if (runtime::RoiRecord::is_sample(n)) samples.push_back(n);
  }
  EXPECT_EQ(samples, (std::vector<int64_t>{2, 10, 100, 1000, 10000}));
}

TEST(Roi, AModuleThatGaveUpRunsEagerlyAndStaysCorrect) {
  NoGradGuard no_grad;
  auto m = std::make_shared<Mlp>(8);
  auto fast = compile(m, {.roi_guard = true});
  Tensor x = randn({2, 8});
  Tensor want = (*m)(x);
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(allclose(fast(x), want, 1e-4, 1e-5)) << i;
  const compiler::ModuleRoi r = compiler::report().modules.back();
  EXPECT_EQ(r.eager_samples, 2);
  // Which way it measured depends on this machine; once it gave up, every call is eager.
  if (r.gave_up) {
    EXPECT_EQ(r.eager_calls + r.compiled_calls, 29) << r.str();
    EXPECT_GT(r.eager_calls, r.eager_samples) << r.str();
  } else {
    EXPECT_EQ(r.compiled_calls, 27) << r.str();
  }
}

TEST(Threads, ManyThreadsWithRecompilesEqualEager) {
  for (bool async : {false, true}) {
    test::ThreadsCase c = test::run_threads_case(8, 150, async);
    EXPECT_EQ(c.mismatches, 0) << (async ? "async" : "sync") << ": " << c.first_error;
    EXPECT_EQ(c.errors, 0) << c.first_error;
  }
}

}  // namespace
}  // namespace zc
