// MatmulPrecision::Bf16 (cpu/bf16_gemm.h, runtime/products/bf16_products.h): products with bf16
// operands equal an exact sum of the bf16-rounded operands' products (f32 accumulation) for every
// layout; which products of a compiled graph take them; that the code is shared with the
// default; and, on a CPU without bf16 products (this project's AVX2 machine, CI), that the
// option changes nothing, bit for bit. The bf16 half runs on the GPU host's Xeon
// (scripts/gpu-test.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "capture/capture.h"
#include "cpu/bf16_gemm.h"
#include "cpu/gemm_choice.h"
#include "run_model.h"
#include "runtime/driver/compile_graph.h"
#include "unit/captured_args.h"
#include "unit/gemm_problems.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using cpu::GemmChoice;
using cpu::GemmProblem;

// x rounded to the nearest bfloat16 (ties to even), as a float: zc's own 16-bit type.
float to_bf16(float x) {
  return static_cast<float>(BFloat16(x));
}

// f32, C's leading dim padded too (its padding must stay untouched).
GemmProblem problem(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t pad) {
  GemmProblem p = test::gemm_problem(DType::f32, ta, tb, m, n, k, pad);
  p.ldc += pad;
  return p;
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(gen);
  return v;
}

TEST(Bf16Products, WhichProductsPay) {
  EXPECT_TRUE(cpu::bf16_pays(512, 768, 256));
  EXPECT_FALSE(cpu::bf16_pays(128, 128, 64));  // a head's scores
  // The rule is applied when the product runs: a small product with the bit runs in f32.
  const GemmProblem small = problem(false, true, 67, 45, 129, 3);
  const auto [ea, eb, ec] = small.extents();
  const std::vector<float> a = random_floats(ea, 1), b = random_floats(eb, 2);
  std::vector<float> f32(static_cast<size_t>(ec)), with_bit(static_cast<size_t>(ec));
  GemmChoice bit;
  bit.bf16 = true;
  cpu::run_gemm(small, GemmChoice{}, a.data(), b.data(), f32.data());
  cpu::run_gemm(small, bit, a.data(), b.data(), with_bit.data());
  EXPECT_EQ(with_bit, f32);
  GemmChoice c;
  c.bf16 = true;
  EXPECT_EQ(GemmChoice::from_code(c.code()), c);
  EXPECT_NE(c.str(16).find("bf16 operands"), std::string::npos);
}

TEST(Bf16Products, EqualTheRoundedOperandsProductsInEveryLayout) {
  GemmChoice bf16;
  bf16.bf16 = true;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("ta ") + (ta ? "1" : "0") + " tb " + (tb ? "1" : "0"));
      // 163 x 200 x 131: odd sizes past the 2^22 multiply-adds bf16 needs (bf16_pays).
      const GemmProblem p = problem(ta, tb, 163, 200, 131, 3);
      const auto [ea, eb, ec] = p.extents();
      const std::vector<float> a = random_floats(ea, 1), b = random_floats(eb, 2);
      std::vector<float> f32(static_cast<size_t>(ec), 7.f), got(static_cast<size_t>(ec), 7.f);
      cpu::run_gemm(p, GemmChoice{}, a.data(), b.data(), f32.data());
      if (!cpu::bf16_gemm_available()) {
        // The product runs in f32 instead, and sgemm_bf16 leaves C alone.
        cpu::run_gemm(p, bf16, a.data(), b.data(), got.data());
        EXPECT_EQ(got, f32);
        std::vector<float> untouched(static_cast<size_t>(ec), 7.f);
        EXPECT_FALSE(cpu::sgemm_bf16(ta, tb, p.m, p.n, p.k, a.data(), p.lda, b.data(), p.ldb,
                                     untouched.data(), p.ldc));
        EXPECT_EQ(untouched, std::vector<float>(static_cast<size_t>(ec), 7.f));
        continue;
      }
      cpu::run_gemm(p, bf16, a.data(), b.data(), got.data());
      double differs = 0;
      for (int64_t r = 0; r < p.m; ++r) {
        for (int64_t col = 0; col < p.n; ++col) {
          double want = 0, magnitude = 0;
          for (int64_t x = 0; x < p.k; ++x) {
            const double t = static_cast<double>(to_bf16(a[ta ? x * p.lda + r : r * p.lda + x])) *
                             to_bf16(b[tb ? col * p.ldb + x : x * p.ldb + col]);
            want += t;
            magnitude += std::fabs(t);
          }
          const size_t at = static_cast<size_t>(r * p.ldc + col);
          ASSERT_NEAR(got[at], want, 1e-5 * magnitude + 1e-30) << "at " << r << "," << col;
          differs = std::max(differs, std::fabs(static_cast<double>(got[at]) - f32[at]));
        }
      }
      EXPECT_GT(differs, 0) << "the bf16 product equals the f32 one: operands were not rounded";
      // C's padding is not written.
      for (int64_t r = 0; r < p.m; ++r) {
        for (int64_t col = p.n; col < p.ldc && r * p.ldc + col < ec; ++col)
          EXPECT_EQ(got[static_cast<size_t>(r * p.ldc + col)], 7.f);
      }
    }
  }
  if (!cpu::bf16_gemm_available()) {
    GTEST_SKIP() << "this CPU has no bf16 products (oneDNN needs AVX-512): the f32 fallback was "
                    "checked, the bf16 products run on the GPU host's Xeon";
  }
}

// More distinct problems than the plans kept (512): evicted problems are planned again, and
// each product stays right (a 2 x n x 4 product, checked against its rounded operands).
TEST(Bf16Products, ManyDistinctProblemsStayRight) {
  if (!cpu::bf16_gemm_available()) {
    GTEST_SKIP() << "this CPU has no bf16 products (oneDNN needs AVX-512)";
  }
  const std::vector<float> a = random_floats(2 * 4, 3), b = random_floats(4 * 700, 4);
  for (int round = 0; round < 2; ++round) {
    for (int64_t n = 1; n <= 700; n += 1) {
      std::vector<float> c(static_cast<size_t>(2 * n));
      ASSERT_TRUE(cpu::sgemm_bf16(false, false, 2, n, 4, a.data(), 4, b.data(), n, c.data(), n));
      for (int64_t r = 0; r < 2; ++r) {
        const int64_t col = n - 1;
        double want = 0;
        for (int64_t x = 0; x < 4; ++x)
          want += static_cast<double>(to_bf16(a[r * 4 + x])) * to_bf16(b[x * n + col]);
        ASSERT_NEAR(c[static_cast<size_t>(r * n + col)], want, 1e-5) << "n " << n;
      }
    }
  }
}

TEST(Bf16Products, ACompiledGptSharesItsCodeAndStaysClose) {
  NoGradGuard no_grad;
  manual_seed(3);
  auto model = models::gpt(models::gpt_small_config(1));
  model->eval();
  const std::vector<Tensor> x{models::gpt_small_tokens()};
  capture::Captured cap = capture::capture_module(*model, x[0], nullptr, true);
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  runtime::CompileContext ctx;
  auto exact = runtime::compile_graph(cap.graph, cpp, ctx);
  const int64_t before = compiler::stats().compiler_invocations;
  auto bf16 = runtime::compile_graph(cap.graph, cpp, ctx, std::nullopt, false, {.bf16 = true});
  EXPECT_EQ(compiler::stats().compiler_invocations, before) << "the bf16 executable compiled";
  // Every product's choice has the bit; the Linear products are the ones large enough to use
  // it (the rule applies per call, at the call's sizes).
  for (uint8_t code : bf16->product_choices()) EXPECT_TRUE(GemmChoice::from_code(code).bf16);
  int paying = 0;
  for (const codegen::LibraryProduct& lp : bf16->library_products())
    paying += cpu::bf16_pays(lp.problem.m, lp.problem.n, lp.problem.k);
  EXPECT_GE(paying, 4);  // QKV, out, MLP up and down

  const std::vector<const Tensor*> args = test::captured_args(cap, x);
  const Tensor want = exact->run(args)[0], got = bf16->run(args)[0];
  const double scale = amax(abs(want)).item<double>();
  const double err = amax(abs(got - want)).item<double>();
  // Through zc::compile, hierarchical parts included.
  auto fast = compile(model, {.matmul_precision = MatmulPrecision::Bf16});
  const Tensor via_compile = fast(x[0]);
  auto default_compile = compile(model);
  const double compile_err = amax(abs(via_compile - default_compile(x[0]))).item<double>();
  // Code made for many sizes (every dim dynamic from the first call: size templates), at two
  // lengths: its products follow the option too.
  auto dynamic_bf16 =
      compile(model, {.matmul_precision = MatmulPrecision::Bf16, .dynamic = Dynamic::All});
  auto dynamic_f32 = compile(model, {.dynamic = Dynamic::All});
  std::vector<double> dynamic_err;
  for (int64_t length : {int64_t{128}, int64_t{96}}) {
    const Tensor tokens = x[0].slice(1, 0, length).contiguous();
    dynamic_err.push_back(amax(abs(dynamic_bf16(tokens) - dynamic_f32(tokens))).item<double>());
  }
  if (!cpu::bf16_gemm_available()) {
    EXPECT_EQ(err, 0);
    EXPECT_EQ(compile_err, 0);
    for (double e : dynamic_err) EXPECT_EQ(e, 0);
    GTEST_SKIP() << "this CPU has no bf16 products: the option changed nothing, as it should";
  }
  EXPECT_GT(err, 0);
  EXPECT_LT(err, 2e-2 * scale);  // docs/codegen.md, "bf16 products": a few 1e-3 measured
  EXPECT_GT(compile_err, 0);
  EXPECT_LT(compile_err, 2e-2 * scale);
  for (double e : dynamic_err) {
    EXPECT_GT(e, 0);
    EXPECT_LT(e, 2e-2 * scale);
  }
}

}  // namespace
}  // namespace zc
