// Mode::MaxAutotune (runtime/products/autotune.h): every way a product can run (cpu/gemm_choice.h)
// gives the reference's result; choices are timed once per machine and then read, never re-timed,
// from the cache (in-process, a fresh process, a bundle); another CPU's or other libraries'
// records are not used; compiled code runs correctly under every choice.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "cache/cache.h"
#include "capture/capture.h"
#include "cpu/blas.h"
#include "cpu/gemm_choice.h"
#include "run_model.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/products/autotune.h"
#include "test_support.h"
#include "unit/captured_args.h"
#include "unit/gemm_problems.h"
#include "util/stats.h"
#include "zc/zc.h"

namespace zc {
namespace {

using cpu::GemmChoice;
using cpu::GemmProblem;

GemmProblem problem(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t pad = 0) {
  return test::gemm_problem(dt, ta, tb, m, n, k, pad);
}

// Problems of the kinds generated code makes: each transpose, padded leading dims, sizes that
// are not multiples of a vector, one batch dim, two with a broadcast operand (stride 0).
std::vector<GemmProblem> problems(DType dt) {
  std::vector<GemmProblem> out;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) out.push_back(problem(dt, ta, tb, 33, 17, 9, ta ? 3 : 0));
  }
  out.push_back(problem(dt, false, false, 1, 70, 65));
  // Products on a weight (a packed candidate for f32), as a Linear's B^T and as given.
  for (bool tb : {true, false}) {
    GemmProblem w = problem(dt, false, tb, 40, 24, 16, 1);
    w.b_weight = true;
    out.push_back(w);
  }
  GemmProblem heads = problem(dt, false, true, 20, 20, 8);
  heads.batch = {{6, 20 * 8, 20 * 8, 20 * 20}};
  out.push_back(heads);
  GemmProblem shared_b = problem(dt, false, false, 7, 5, 3);
  shared_b.batch = {{2, 3 * 7 * 3, 0, 3 * 7 * 5}, {3, 7 * 3, 0, 7 * 5}};
  out.push_back(shared_b);
  return out;
}

// C from A and B in double, as `p` lays them out.
std::vector<double> reference(const GemmProblem& p, const std::vector<double>& a,
                              const std::vector<double>& b) {
  std::vector<double> c(static_cast<size_t>(p.extents()[2]), 0.0);
  const int64_t count = p.products();
  for (int64_t i = 0; i < count; ++i) {
    int64_t oa = 0, ob = 0, oc = 0, rest = i;
    for (size_t d = p.batch.size(); d-- > 0;) {
      const int64_t at = rest % p.batch[d][0];
      rest /= p.batch[d][0];
      oa += at * p.batch[d][1];
      ob += at * p.batch[d][2];
      oc += at * p.batch[d][3];
    }
    for (int64_t r = 0; r < p.m; ++r) {
      for (int64_t col = 0; col < p.n; ++col) {
        double acc = 0;
        for (int64_t x = 0; x < p.k; ++x) {
          acc += a[oa + (p.ta ? x * p.lda + r : r * p.lda + x)] *
                 b[ob + (p.tb ? col * p.ldb + x : x * p.ldb + col)];
        }
        c[oc + r * p.ldc + col] = acc;
      }
    }
  }
  return c;
}

TEST(GemmChoice, CodesRoundTripAndForeignCodesAreRefused) {
  for (int code = 0; code < 256; ++code) {
    const bool valid = ((code >> 5) & 3) != 3;
    if (valid) {
      EXPECT_EQ(GemmChoice::from_code(static_cast<uint8_t>(code)).code(), code);
    } else {
      test::expect_error_containing([&] { GemmChoice::from_code(static_cast<uint8_t>(code)); },
                                    "is not one zc makes");
    }
  }
  EXPECT_EQ(GemmChoice{}.code(), 0);
  GemmChoice one{GemmChoice::Library::onednn, GemmChoice::kOneThread, GemmChoice::Batch::in_turn};
  EXPECT_EQ(one.threads(16), 1);
  EXPECT_EQ(GemmChoice{}.threads(16), 16);
  EXPECT_EQ((GemmChoice{GemmChoice::Library::standard, 2, GemmChoice::Batch::standard}).threads(2),
            1);
  EXPECT_EQ(one.str(16), "oneDNN, 1 of 16 threads, products in turn");
}

TEST(GemmChoice, CandidatesStartWithTheDefaultAndAreDistinct) {
  for (int team : {1, 2, 16}) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const GemmProblem& p : problems(dt)) {
        const std::vector<GemmChoice> c = cpu::gemm_candidates(p, team);
        ASSERT_FALSE(c.empty());
        for (size_t i = 0; i < c.size(); ++i) {
          for (size_t j = i + 1; j < c.size(); ++j) EXPECT_NE(c[i].code(), c[j].code());
        }
        EXPECT_EQ(c[0].shift, 0) << p.str();
        const bool dnnl = cpu::default_f32_library() == cpu::GemmLibrary::onednn;
        EXPECT_EQ(c[0].library, dt == DType::f32 && dnnl ? GemmChoice::Library::onednn
                                                         : GemmChoice::Library::openblas);
        if (p.products() > 1) {
          const bool out = cpu::share_batch_out(p.products(), p.m * p.n * p.k);
          EXPECT_EQ(c[0].batch, out ? GemmChoice::Batch::shared_out : GemmChoice::Batch::in_turn);
        }
      }
    }
  }
}

// Each candidate, not only a winner: every library, thread share and batch sharing.
TEST(GemmChoice, EveryCandidateEqualsTheFloat64Reference) {
  for (DType dt : {DType::f32, DType::f64}) {
    for (const GemmProblem& p : problems(dt)) {
      const auto e = p.extents();
      std::vector<double> a(static_cast<size_t>(e[0])), b(static_cast<size_t>(e[1]));
      for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37 * static_cast<double>(i));
      for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.53 * static_cast<double>(i));
      const std::vector<double> want = reference(p, a, b);
      // Team 16 lists every share even on a smaller machine (shares of the real team then).
      for (const GemmChoice& choice : cpu::gemm_candidates(p, 16)) {
        std::vector<double> got(want.size(), 0.0);
        if (dt == DType::f64) {
          cpu::run_gemm(p, choice, a.data(), b.data(), got.data());
        } else {
          std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(want.size(), 0);
          cpu::run_gemm(p, choice, af.data(), bf.data(), cf.data());
          got.assign(cf.begin(), cf.end());
        }
        const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]) * static_cast<double>(p.k)))
              << p.str() << " as " << choice.str(16) << " at " << i;
        }
      }
    }
  }
}

cache::CacheConfig disk_config(const std::string& dir) {
  cache::CacheConfig c;
  c.dir = dir;
  return c;
}

// tune_products through a compile over `store` (null: no cache at all).
std::vector<runtime::TunedProduct> tune(std::span<const GemmProblem> ps, cache::Cache* store,
                                        const runtime::TuningHost& host) {
  runtime::CompileContext ctx(store);
  return runtime::tune_products(ps, ctx, host);
}

TEST(Autotune, ChoicesAreTimedOncePerMachineAndReadAfterwards) {
  const std::string dir = test::test_dir("autotune");
  const std::vector<GemmProblem> ps = {problem(DType::f32, false, true, 64, 48, 32),
                                       problems(DType::f32)[4], problem(DType::f64, 0, 0, 9, 9, 9)};
  runtime::TuningHost here = runtime::this_host();
  auto timings = [] { return zc::stats::read(zc::stats::Counter::autotune_timings); };

  std::vector<runtime::TunedProduct> cold;
  {
    cache::Cache store(disk_config(dir));
    const int64_t before = timings();
    cold = tune(ps, &store, here);
    EXPECT_EQ(timings() - before, 3);
    for (const auto& t : cold) {
      EXPECT_TRUE(t.timed);
      EXPECT_EQ(t.medians_us.size(), cpu::gemm_candidates(t.problem, t.team).size());
    }
  }
  {
    // A fresh cache on the same directory (a new process): nothing timed, the same choices
    // byte for byte.
    cache::Cache store(disk_config(dir));
    const int64_t before = timings();
    std::vector<runtime::TunedProduct> warm = tune(ps, &store, here);
    EXPECT_EQ(timings() - before, 0);
    ASSERT_EQ(warm.size(), cold.size());
    for (size_t i = 0; i < warm.size(); ++i) {
      EXPECT_FALSE(warm[i].timed);
      EXPECT_EQ(runtime::encode_tuned(warm[i]), runtime::encode_tuned(cold[i]));
    }
  }
  // Another CPU, other library versions, another pool size: records of this one are not used.
  runtime::TuningHost other_cpu = here, other_libs = here, other_pool = here;
  other_cpu.cpu = "cpu=Some Other CPU;cpuid=0";
  other_libs.libraries += " (another build)";
  other_pool.threads += 1;
  for (const runtime::TuningHost& h : {other_cpu, other_libs, other_pool}) {
    cache::Cache store(disk_config(dir));
    const int64_t before = timings();
    tune(std::span(ps).first(1), &store, h);
    EXPECT_EQ(timings() - before, 1);
  }
  // No cache at all (ZC_FORCE_DISABLE_CACHES's path): timed every time.
  const int64_t before = timings();
  tune(std::span(ps).first(1), nullptr, here);
  tune(std::span(ps).first(1), nullptr, here);
  EXPECT_EQ(timings() - before, 2);
}

TEST(Autotune, RecordsRoundTripAndBadOnesAreTimedAgain) {
  runtime::TunedProduct t;
  t.problem = problems(DType::f32)[7];
  ASSERT_GT(t.problem.products(), 1);
  t.choice = GemmChoice{GemmChoice::Library::openblas, 1, GemmChoice::Batch::in_turn};
  t.team = 4;
  t.medians_us = {{GemmChoice{}, 10.5}, {t.choice, 7.25}};
  const std::vector<uint8_t> bytes = runtime::encode_tuned(t);
  runtime::TunedProduct back = runtime::decode_tuned(bytes);
  EXPECT_EQ(back.problem, t.problem);
  EXPECT_EQ(back.choice, t.choice);
  EXPECT_EQ(runtime::encode_tuned(back), bytes);
  {  // a product on a weight, kept packed
    runtime::TunedProduct w = t;
    w.problem = problems(DType::f32)[5];
    ASSERT_TRUE(w.problem.b_weight);
    w.choice = GemmChoice{GemmChoice::Library::onednn_packed, 2};
    const runtime::TunedProduct wb = runtime::decode_tuned(runtime::encode_tuned(w));
    EXPECT_EQ(wb.problem, w.problem);
    EXPECT_EQ(wb.choice, w.choice);
    EXPECT_NE(wb.problem.str().find("B weight"), std::string::npos) << wb.problem.str();
  }
  EXPECT_NE(runtime::describe_tuned(back).find("-> OpenBLAS, 2 of 4 threads, products in turn "
                                               "(7.2 us; default 10.5 us)"),
            std::string::npos)
      << runtime::describe_tuned(back);
  for (size_t cut : {size_t{0}, size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    test::expect_error_containing([&] { runtime::decode_tuned(std::span(bytes).first(cut)); },
                                  "autotune record");
  }
  std::vector<uint8_t> foreign = bytes;
  foreign[bytes.size() - 9 - 9 - 8 - 4 - 1] = 0xff;  // the choice byte
  test::expect_error_containing([&] { runtime::decode_tuned(foreign); }, "is not one zc makes");

  // A record whose payload is unreadable is timed again, not trusted and not fatal.
  cache::Cache store(disk_config(test::test_dir("autotune")));
  const runtime::TuningHost host = runtime::this_host();
  const std::vector<GemmProblem> ps = {problem(DType::f32, false, false, 16, 16, 16)};
  tune(ps, &store, host);
  store.put(runtime::tuning_record_key(ps[0], host), {1, 2, 3}, 0);
  const int64_t before = zc::stats::read(zc::stats::Counter::autotune_timings);
  tune(ps, &store, host);
  EXPECT_EQ(zc::stats::read(zc::stats::Counter::autotune_timings) - before, 1);
}

// Compiled code under every candidate choice gives the untuned result: the choices reach the
// products they are for, whatever they are.
// Every call site of a compiled graph run under each of its candidate choices in turn equals
// the untuned result: gpt's Linear products, and a batch of products (heads) in one call.
void expect_every_choice_runs_right(const capture::Captured& cap, std::span<const Tensor> user,
                                    bool batched) {
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  runtime::CompileContext ctx;
  auto exec = runtime::compile_graph(cap.graph, cpp, ctx);
  const std::vector<const Tensor*> args = test::captured_args(cap, user);
  const Tensor want = exec->run(args)[0];
  const std::vector<codegen::LibraryProduct> products = exec->library_products();
  ASSERT_FALSE(products.empty());
  bool any_batch = false;
  size_t most = 0;
  for (const auto& lp : products) {
    any_batch = any_batch || lp.problem.products() > 1;
    most = std::max(most, cpu::gemm_candidates(lp.problem, 16).size());
  }
  EXPECT_EQ(any_batch, batched);
  for (size_t round = 0; round < most; ++round) {
    std::vector<uint8_t> choices = exec->product_choices();
    for (const auto& lp : products) {
      const auto c = cpu::gemm_candidates(lp.problem, 16);
      choices[static_cast<size_t>(lp.site)] = c[round % c.size()].code();
    }
    auto tuned = exec->with_product_choices(choices);
    EXPECT_EQ(tuned->product_choices(), choices);
    // Twice: a packed choice keeps its weight from the second call on.
    for (int call = 0; call < 2; ++call) {
      EXPECT_TRUE(allclose(tuned->run(args)[0], want, 1e-4, 1e-4)) << "round " << round;
    }
  }
  test::expect_error_containing([&] { exec->with_product_choices({1, 2}); }, "product choices for");
  std::vector<uint8_t> foreign = exec->product_choices();
  foreign[static_cast<size_t>(products[0].site)] = 0xff;
  test::expect_error_containing([&] { exec->with_product_choices(foreign); },
                                "is not one zc makes");
}

TEST(Autotune, CompiledCodeRunsRightUnderEveryChoice) {
  NoGradGuard no_grad;
  manual_seed(3);
  auto model = models::gpt(models::gpt_small_config(1));
  model->eval();
  const std::vector<Tensor> x{models::gpt_small_tokens()};
  {
    SCOPED_TRACE("gpt (its attention is one kernel: no batched products)");
    expect_every_choice_runs_right(capture::capture_module(*model, x[0], nullptr, true), x, false);
  }
  SCOPED_TRACE("a batch of 8 products of 64x32x48, with a broadcast operand");
  const std::vector<Tensor> in{randn({2, 4, 64, 32}), randn({4, 32, 48})};
  expect_every_choice_runs_right(
      capture::capture_function(in, [&] { return std::vector<Tensor>{matmul(in[0], in[1]) * 2}; }),
      in, true);
}

// Across processes: a cold max_autotune process times, a warm one (same cache directory) or one
// that imported the cold one's bundle into an empty directory times nothing and chooses the
// same, byte for byte; both equal eager.
TEST(Autotune, AWarmProcessOrABundleTimesNothing) {
  const std::string dir = test::test_dir("autotune");
  const std::string env = "ZC_CACHE_DIR=" + dir + "/cache";
  const std::string args = "--model gpt --layers 2 --mode max-autotune --save " + dir + "/b.zcb";
  test::ProcessRun cold = test::run_model(env, args);
  ASSERT_EQ(cold.rc, 0) << cold.out;
  EXPECT_GT(cold.num("compiler", "autotune_timings"), 0) << cold.out;
  EXPECT_LT(std::stod(cold.lines.at("max_diff")), 1e-4);
  auto choices = [](const test::ProcessRun& r) {
    std::string s;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("choice ", 0) == 0) s += line + "\n";
    }
    return s;
  };
  ASSERT_FALSE(choices(cold).empty()) << cold.out;

  test::ProcessRun warm = test::run_model(env, "--model gpt --layers 2 --mode max-autotune");
  ASSERT_EQ(warm.rc, 0) << warm.out;
  EXPECT_EQ(warm.num("compiler", "autotune_timings"), 0) << warm.out;
  EXPECT_EQ(warm.num("compiler", "compiler_invocations"), 0) << warm.out;
  EXPECT_EQ(choices(warm), choices(cold));

  const std::string fresh = "ZC_CACHE_DIR=" + dir + "/fresh";
  test::ProcessRun bundled =
      test::run_model(fresh, "--model gpt --layers 2 --mode max-autotune --load " + dir + "/b.zcb");
  ASSERT_EQ(bundled.rc, 0) << bundled.out;
  EXPECT_EQ(bundled.num("compiler", "autotune_timings"), 0) << bundled.out;
  EXPECT_EQ(choices(bundled), choices(cold));

  // `zc cache ls` shows each recorded choice.
  test::ProcessRun ls = test::zc_cli(env, "cache ls");
  ASSERT_EQ(ls.rc, 0) << ls.out;
  EXPECT_NE(ls.out.find("autotune "), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(" -> "), std::string::npos) << ls.out;

  // The default mode in the same directory tunes nothing and reports no choices.
  test::ProcessRun plain = test::run_model(env, "--model gpt --layers 2");
  ASSERT_EQ(plain.rc, 0) << plain.out;
  EXPECT_EQ(plain.num("compiler", "autotune_timings"), 0);
  EXPECT_EQ(plain.num("compiler", "autotune_hits"), 0);
  EXPECT_TRUE(choices(plain).empty());
}

}  // namespace
}  // namespace zc
