// The CPU backend: generated code against the interpreter, fusion by kernel count, what the
// generated source contains, the extern fallback, and failure behaviour.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <thread>

#include "capture/capture.h"
#include "codegen/backends/cpp/backend.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "runtime/driver/compile_graph.h"
#include "toolchain/target.h"
#include "unit/op_programs.h"
#include "unit/run_model.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::Fn;

ir::Graph lowered_graph(nn::Module& m, const Tensor& x) {
  auto cap = capture::capture_module(m, x, nullptr, true);
  return lower::lower(cap.graph, lower::LowerContext{});
}

codegen::CodegenResult generate(nn::Module& m, const Tensor& x,
                                codegen::cpp::CppOptions options = {}) {
  auto backend = codegen::cpp::make_cpp_backend(std::move(options));
  return codegen::codegen(lowered_graph(m, x), *backend);
}

// Compiled (generated C++) against the interpreter on the same captured graph.
void expect_matches_interpreter(std::shared_ptr<nn::Module> m, const Tensor& x, double rtol,
                                double atol, const std::string& what) {
  Tensor ref = compile(m, {.backend = "eager"})(x);
  Tensor got = compile(m, {.backend = "cpp"})(x);
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  ASSERT_EQ(got.dtype(), ref.dtype()) << what;
  EXPECT_TRUE(allclose(got, ref, rtol, atol))
      << what << ": max diff " << max(abs(got.to(DType::f64) - ref.to(DType::f64))).item<double>();
}

// Tolerances: elementwise chains differ from the eager kernels only where the generated code
// uses its own exp/tanh (within 2 ulp) and where the compiler contracts a*b+c into one
// fused multiply-add, so 1e-5 relative; reductions and matmuls may add in another order, so
// the error grows with the reduction length: 1e-4 for the lengths used here.
constexpr double kPointwiseTol = 1e-5;
constexpr double kReduceTol = 1e-4;

struct Case {
  const char* name;
  double tol;
  std::function<Tensor(const Tensor&)> f;
};

std::vector<Case> op_cases() {
  return {
      {"unary", kPointwiseTol,
       [](const Tensor& x) {
         return -abs(x) + exp(x) * log(abs(x) + 1.0) + sqrt(abs(x)) - rsqrt(abs(x) + 1.0);
       }},
      {"activations", kPointwiseTol,
       [](const Tensor& x) {
         return tanh(x) + sigmoid(x) + relu(x) + gelu(x) + gelu(x, GeluApprox::tanh) + erf(x);
       }},
      {"clamp_cast_pow", kPointwiseTol,
       [](const Tensor& x) {
         return clamp(x, -0.5, 0.5) + cast(cast(x * 4.0, DType::i32), DType::f32) +
                pow(abs(x), 1.5) + pow(abs(x) + 1.0, x);
       }},
      // x * 4 is exact, so no rounding upstream moves a value across an integer or a multiple
      // of the divisor; integer divisors of 0 among them.
      {"rounding_trig_remainders", kPointwiseTol,
       [](const Tensor& x) {
         Tensor y = x * 4.0, i = cast(y, DType::i32);
         return floor(y) + ceil(y) + round(y) + trunc(y) + sin(x) * cos(y) + fmod(y, 0.75) +
                remainder(y, -0.75) + cast(fmod(i, i - 1.0) + remainder(i, 3.0), DType::f32);
       }},
      // tanh keeps asin's and acos's arguments inside (-1, 1).
      {"inverse_trig", kPointwiseTol,
       [](const Tensor& x) { return asin(tanh(x)) + acos(tanh(x * 0.5)) * atan(x * 3.0); }},
      {"binary_broadcast", kPointwiseTol,
       [](const Tensor& x) {
         Tensor row = mean(x, {0}, true);
         return maximum(x, row) - minimum(x, x * 0.5) + x / (abs(row) + 1.0);
       }},
      {"compare_where", kPointwiseTol,
       [](const Tensor& x) {
         return where(gt(x, 0.0), x, x * 0.1) + cast(eq(x, x), DType::f32) +
                cast(ne(x, 0.5), DType::f32) + cast(lt(x, 0.0), DType::f32) +
                cast(le(x, 0.2), DType::f32) + cast(ge(x, -0.2), DType::f32);
       }},
      // Draws uniform values below 1 and normal ones within 5.8: the result does not depend on
      // the draw
      // (tests/unit/rand_like_test.cpp compares draws themselves).
      {"rand_like", kPointwiseTol,
       [](const Tensor& x) {
         return x * cast(lt(rand_like(x), 1.0), DType::f32) *
                    cast(lt(abs(randn_like(x)), 6.0), DType::f32) -
                1.0;
       }},
      {"reductions", kReduceTol,
       [](const Tensor& x) {
         return sum(x, {1}, true) + amax(x, {1}, true) * amin(x, {1}, true) + mean(x) +
                var(x, {1}, 1, true) + cast(argmax(x, 1, true), DType::f32);
       }},
      {"reduce_dim0", kReduceTol, [](const Tensor& x) { return sum(exp(x), {0}) + amax(x, {0}); }},
      {"softmax_layernorm", kReduceTol,
       [](const Tensor& x) {
         return softmax(x, 1) + log_softmax(x, 0) + layer_norm(x, {x.size(1)});
       }},
      {"layout", kPointwiseTol,
       [](const Tensor& x) {
         Tensor t = x.t().contiguous();
         return (t.reshape({-1}).slice(0, 0, t.numel(), 1).reshape(t.shape()).t() +
                 sum(x.slice(1, 0, x.size(1), 2), {1}, true).expand(x.shape()));
       }},
      {"matmul", kReduceTol,
       [](const Tensor& x) { return sum(matmul(x, x.t()), {1}, true) + sum(matmul(x.t(), x)); }},
      {"cat_embedding", kPointwiseTol,
       [](const Tensor& x) {
         Tensor idx =
             cast(clamp(abs(x) * 3.0, 0.0, static_cast<double>(x.size(0) - 1)), DType::i64);
         Tensor rows = embedding(x, idx.slice(1, 0, 1));
         return cat({x, x * 2.0}, 1).slice(1, 1, x.size(1) + 1) + sum(rows, {1});
       }},
  };
}

TEST(CodegenNumerics, EveryOpMatchesTheInterpreter) {
  manual_seed(5);
  // Small, size-1, non-contiguous, and large enough for the parallel loops.
  std::vector<Tensor> inputs = {randn({3, 4}), randn({1, 5}), randn({6, 5}).t(), randn({300, 257})};
  std::set<ops::OpId> seen;
  for (const Case& c : op_cases()) {
    for (const Tensor& x : inputs) {
      auto m = std::make_shared<Fn>(c.f);
      expect_matches_interpreter(m, x, c.tol, c.tol,
                                 std::string(c.name) + " " + shape_str(x.shape()));
      for (const ir::Node& n : lowered_graph(*m, x).nodes) seen.insert(n.op);
    }
  }
  for (int i = 0; i < ops::kNumOps; ++i) {
    const ops::OpDef& def = ops::op_def(static_cast<ops::OpId>(i));
    if (def.decompose) continue;  // composites never reach the code generator
    EXPECT_TRUE(seen.count(def.id)) << "no case generates code for " << def.name;
  }
}

TEST(CodegenNumerics, OtherDtypes) {
  manual_seed(6);
  auto chain = [](const Tensor& x) { return relu(x * 2.0 + 1.0) - sigmoid(x) / (abs(x) + 1.0); };
  for (DType t : {DType::f64, DType::f16, DType::bf16}) {
    Tensor x = randn({7, 9}).to(t);
    double tol = t == DType::f64 ? 1e-12 : 1e-2;
    expect_matches_interpreter(std::make_shared<Fn>(chain), x, tol, tol,
                               std::string(dtype_name(t)));
    expect_matches_interpreter(
        std::make_shared<Fn>([](const Tensor& x) { return softmax(x, 1) + sum(x, {0}, true); }), x,
        tol, tol, std::string("reduce ") + std::string(dtype_name(t)));
  }
  for (DType t : {DType::i32, DType::i64}) {
    Tensor x = randint(-5, 6, {4, 6}, t);
    expect_matches_interpreter(std::make_shared<Fn>([](const Tensor& x) {
                                 return maximum(x * 3, abs(x)) + where(gt(x, 0.0), x, neg(x)) +
                                        sum(x, {1}, true) + cast(argmax(x, 1, true), x.dtype());
                               }),
                               x, 0, 0, std::string(dtype_name(t)));
  }
  Tensor b = gt(randn({5, 5}), 0.0);
  expect_matches_interpreter(std::make_shared<Fn>([](const Tensor& x) {
                               return where(x, ones({}), zeros({})) + cast(x, DType::f32);
                             }),
                             b, 0, 0, "bool");
}

TEST(CodegenNumerics, Seed64AndGptMatchEager) {
  manual_seed(7);
  auto seed = models::seed_model(64);
  Tensor x = randn({10, 10});
  EXPECT_TRUE(allclose(compile(seed)(x), (*seed)(x), kPointwiseTol, 1e-6));

  auto gpt =
      models::gpt({.vocab_size = 97, .block_size = 32, .n_layer = 2, .n_head = 4, .d_model = 32});
  gpt->eval();
  Tensor tokens = randint(0, 97, {2, 16});
  // Logits reach |30| after two blocks; the generated softmax, layer_norm and GEMM epilogues
  // round differently from the fused eager kernels at the f32 ulp of such values.
  EXPECT_TRUE(allclose(compile(gpt)(tokens), (*gpt)(tokens), kReduceTol, kReduceTol));
}

int count_kind(const codegen::Schedule& s, codegen::KernelKind k) {
  int n = 0;
  for (const auto& K : s.kernels) n += K.kind == k;
  return n;
}

// Tensors with a dim of size 0: a sum over an empty dim is its identity per row (the row loop
// runs, the empty one does not), and a kernel over no elements writes nothing.
TEST(CodegenNumerics, EmptyDimsMatchEager) {
  NoGradGuard no_grad;
  const std::vector<std::pair<test::Program, Shape>> cases = test::empty_dim_programs();
  for (size_t i = 0; i < cases.size(); ++i) {
    auto m = std::make_shared<test::Fn>(cases[i].first);
    const Tensor x = randn(cases[i].second);
    const Tensor want = (*m)(x);
    const Tensor got = compile(m)(x);
    ASSERT_EQ(got.shape(), want.shape()) << "case " << i;
    EXPECT_TRUE(allclose(got, want, 1e-5, 1e-6)) << "case " << i;
  }
}

TEST(CodegenFusion, LayerNormIsOneKernel) {
  auto ln = std::make_shared<nn::LayerNorm>(64);
  auto r = generate(*ln, randn({8, 64}));
  ASSERT_EQ(r.schedule.kernels.size(), 1u);
  EXPECT_EQ(r.schedule.kernels[0].kind, codegen::KernelKind::row_reduce);
}

TEST(CodegenFusion, SoftmaxIsOneKernel) {
  Fn m([](const Tensor& x) { return softmax(x, -1); });
  auto r = generate(m, randn({4, 8, 32}));
  ASSERT_EQ(r.schedule.kernels.size(), 1u);
  EXPECT_EQ(r.schedule.kernels[0].kind, codegen::KernelKind::row_reduce);
}

TEST(CodegenFusion, LinearReluSigmoidIsOneMatmulWithEpilogue) {
  struct M : nn::Module {
    std::shared_ptr<nn::Linear> lin = register_module("lin", std::make_shared<nn::Linear>(10, 10));
    Tensor forward(const Tensor& x) override { return sigmoid(relu((*lin)(x))); }
  } m;
  auto r = generate(m, randn({10, 10}));
  ASSERT_EQ(r.schedule.kernels.size(), 1u);
  const codegen::Kernel& k = r.schedule.kernels[0];
  EXPECT_EQ(k.kind, codegen::KernelKind::matmul);
  std::vector<std::string> names;
  for (int32_t n : k.nodes) names.emplace_back(ops::op_def(r.schedule.graph.nodes[n].op).name);
  EXPECT_EQ(names, (std::vector<std::string>{"matmul", "add", "relu", "sigmoid"}));
}

TEST(CodegenFusion, ChainOfTenPointwiseOpsIsOneKernel) {
  Fn m([](const Tensor& x) {
    Tensor y = x;
    y = exp(y);
    y = y + 1.0;
    y = log(y);
    y = y * 0.5;
    y = tanh(y);
    y = relu(y);
    y = y - 0.1;
    y = abs(y);
    y = sqrt(y);
    y = sigmoid(y);
    return y;
  });
  auto r = generate(m, randn({16, 16}));
  ASSERT_EQ(r.schedule.kernels.size(), 1u);
  EXPECT_EQ(r.schedule.kernels[0].kind, codegen::KernelKind::pointwise);
  EXPECT_EQ(r.schedule.kernels[0].nodes.size(), 10u);
}

TEST(CodegenFusion, GptBlockKernels) {
  auto gpt =
      models::gpt({.vocab_size = 64, .block_size = 16, .n_layer = 1, .n_head = 2, .d_model = 16});
  gpt->eval();
  auto r = generate(*gpt, randint(0, 64, {2, 8}));
  // Per block: two layer_norms and one softmax are row kernels; qkv, scores (scale and causal
  // mask fused), values, out-proj (+ residual), fc (+ bias + gelu), proj (+ residual) are
  // matmuls; then the final layer_norm and the tied LM head.
  EXPECT_EQ(count_kind(r.schedule, codegen::KernelKind::row_reduce), 4);
  EXPECT_EQ(count_kind(r.schedule, codegen::KernelKind::matmul), 7);
  EXPECT_EQ(count_kind(r.schedule, codegen::KernelKind::pointwise), 0);
}

TEST(CodegenSource, SmallMatmulIsInlineLargeCallsBlas) {
  auto small = models::seed_model(2);
  std::string src = generate(*small, randn({10, 10})).source.text;
  EXPECT_EQ(src.find("sgemm("), std::string::npos);
  // Ten rows of at most 16 columns: each row in a register for the whole k loop.
  EXPECT_NE(src.find("zc_vf16 zc_row0 = {}"), std::string::npos) << src;
  EXPECT_NE(src.find("zc_row9 += (float)"), std::string::npos) << src;
  EXPECT_EQ(src.find("zc_row10 += "), std::string::npos) << src;
  EXPECT_EQ(src.find("+= av * bt["), std::string::npos) << src;
  // Past 12 rows the rows accumulate in a tile in memory; both give the interpreter's values,
  // from one row (a vector) to past the bound.
  std::string tall = generate(*small, randn({13, 10})).source.text;
  EXPECT_EQ(tall.find("zc_vf16 zc_row0"), std::string::npos) << tall;
  EXPECT_NE(tall.find("+= av * bt["), std::string::npos) << tall;
  for (int64_t rows : {1, 2, 7, 12, 13, 40}) {
    expect_matches_interpreter(models::seed_model(2), randn({rows, 10}), kPointwiseTol, 1e-6,
                               "seed, " + std::to_string(rows) + " rows");
  }

  auto big = std::make_shared<nn::Linear>(256, 256);
  std::string big_src = generate(*big, randn({256, 256})).source.text;
  // An f32 product goes through the service that runs it as its call site's choice says, here
  // with the Linear's bias fused into the call: no loop over the product after it.
  EXPECT_NE(big_src.find("const ZcEpilogue e = {&in"), std::string::npos) << big_src;
  EXPECT_NE(big_src.find("a->svc->sgemm_x(a, 0, 0, 1, 256, 256, 256, "), std::string::npos)
      << big_src;
  EXPECT_EQ(big_src.find("#pragma omp parallel"), std::string::npos) << big_src;
  // An epilogue the call cannot run (a scale) stays a loop after a plain call.
  Fn scaled([](const Tensor& x) { return matmul(relu(x), (x * 2.0).t()) * 3.0; });
  std::string scaled_src = generate(scaled, randn({256, 256})).source.text;
  EXPECT_NE(scaled_src.find(", 0);\n"), std::string::npos) << scaled_src;
  EXPECT_EQ(scaled_src.find("ZcEpilogue e ="), std::string::npos) << scaled_src;
  EXPECT_NE(scaled_src.find("#pragma omp parallel"), std::string::npos) << scaled_src;
  // f64 products call the BLAS service as before.
  std::string f64_src = generate(scaled, randn({256, 256}).to(DType::f64)).source.text;
  EXPECT_NE(f64_src.find("a->svc->dgemm(a->gemm["), std::string::npos) << f64_src;
}

// A GPT block's four Linear products run their epilogues in the library call (ZcEpilogue):
// QKV's bias, the output projection's bias and residual, the MLP's bias and GELU (tanh), its
// projection's bias and residual. The LM head has none.
TEST(CodegenSource, GptProductsRunTheirEpiloguesInTheCall) {
  NoGradGuard no_grad;
  auto gpt = models::gpt(models::gpt_small_config(1));
  gpt->eval();
  const std::string src = generate(*gpt, models::gpt_small_tokens()).source.text;
  size_t fused = 0;
  for (size_t at = src.find("const ZcEpilogue e = {"); at != std::string::npos;
       at = src.find("const ZcEpilogue e = {", at + 1)) {
    ++fused;
  }
  EXPECT_EQ(fused, 4u) << src;
  EXPECT_NE(src.find(", 2};"), std::string::npos) << src;            // GELU, tanh form
  EXPECT_EQ(src.find("zc_tanh((float)"), std::string::npos) << src;  // no GELU loop left
}

TEST(CodegenSource, OpenMPOnlyAboveTheThreshold) {
  Fn m([](const Tensor& x) { return relu(x) * 2.0; });
  std::string small = generate(m, randn({10, 10})).source.text;
  EXPECT_EQ(small.find("#pragma omp parallel"), std::string::npos);
  std::string large = generate(m, randn({512, 1024})).source.text;
  EXPECT_NE(large.find("#pragma omp parallel for"), std::string::npos);
}

TEST(CodegenSource, RowsAreSharedOutByTheWorkOfAllTheirElements) {
  // Four rows of 8192: few rows, but 32768 elements, worth a thread team; every row loop is
  // shared out (a 3-d space collapses both kept dims).
  Fn ln([](const Tensor& x) { return layer_norm(x, {x.size(-1)}); });
  EXPECT_NE(generate(ln, randn({4, 8192})).source.text.find("#pragma omp parallel for"),
            std::string::npos);
  EXPECT_NE(
      generate(ln, randn({4, 8, 1024})).source.text.find("#pragma omp parallel for collapse(2)"),
      std::string::npos);
  EXPECT_EQ(generate(ln, randn({4, 64})).source.text.find("#pragma omp parallel"),
            std::string::npos);
}

TEST(CodegenNumerics, ExtremaKeepNaNsAndInfinities) {
  // Rows: a NaN first, a NaN last, all -inf, all +inf, +-inf mixed, signed zeros and plain
  // values: amax/amin (vectorized, a NaN flag beside them) equal the eager kernels exactly.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {nan, 1,   2,    3, -1,  5,  4,    nan, -inf, -inf, -inf, -inf, inf, inf,
                          inf, inf, -inf, 0, inf, -2, -0.f, 0,   -0.f, 0,    7,    -8,   9,   0.5f};
  Tensor x = from_vector(v, {7, 4});
  for (int64_t dim : {0, 1}) {
    auto m = std::make_shared<Fn>([dim](const Tensor& t) {
      return cat({amax(t, {dim}, true), amin(t, {dim}, true)}, dim);
    });
    Tensor ref = compile(m, {.backend = "eager"})(x).contiguous();
    Tensor got = compile(m, {.backend = "cpp"})(x).contiguous();
    ASSERT_EQ(got.shape(), ref.shape());
    const float* g = got.data<float>();
    const float* r = ref.data<float>();
    for (int64_t i = 0; i < got.numel(); ++i) {
      EXPECT_TRUE((std::isnan(g[i]) && std::isnan(r[i])) || g[i] == r[i])
          << "dim " << dim << " element " << i << ": " << g[i] << " vs " << r[i];
    }
  }
}

TEST(CodegenNumerics, ExpSigmoidAndTanhKeepNaNsInfinitiesAndTails) {
  // The generated float exp (prelude.h) has no NaN test of its own: a NaN flows through its
  // clamps and polynomial. 37 values, so both a vector body and its remainder run them; each
  // against float64, within 2 ulp (denormal results within 2 of their spacing).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {nan,    -nan,   inf,    -inf,    0.f,    -0.f,     1e-8f,  -1e-8f,
                          0.5f,   -0.5f,  1.f,    -1.f,    10.f,   -10.f,    20.f,   -20.f,
                          87.f,   -87.f,  88.5f,  -88.5f,  88.72f, 88.7228f, 88.73f, 89.f,
                          100.f,  -100.f, -103.f, -103.9f, -104.f, -105.f,   -150.f, 1e30f,
                          -1e30f, 3.3f,   -7.7f,  0.3f,    -0.625f};
  Tensor x = from_vector(v, {37});
  auto close = [](float got, double want, double abs_tol) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return static_cast<double>(got) == want;
    return std::abs(got - want) <= 2.4e-7 * std::abs(want) + abs_tol;
  };
  struct Op {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    double (*ref)(double);
    double abs_tol;
  };
  // A sigmoid below -88.7 is 0 where float64's is a denormal (1 / (1 + inf)): within the
  // smallest normal float of it.
  const Op ops[] = {
      {"exp", [](const Tensor& t) { return exp(t); }, [](double a) { return std::exp(a); }, 3e-45},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); },
       [](double a) { return 1 / (1 + std::exp(-a)); }, std::numeric_limits<float>::min()},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double a) { return std::tanh(a); },
       3e-45},
  };
  for (const Op& op : ops) {
    Tensor got = compile(std::make_shared<Fn>(op.f), {.backend = "cpp"})(x).contiguous();
    const float* g = got.data<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      // float64's result rounded to float first: what a correct float function returns.
      const double want = static_cast<float>(op.ref(static_cast<double>(v[i])));
      EXPECT_TRUE(close(g[i], want, op.abs_tol))
          << op.name << "(" << v[i] << ") = " << g[i] << ", want " << want;
    }
  }
}

// The generated float erf (prelude.h: two fitted polynomials and exp, no call, so its loops
// vectorize): within 3 ulp of float64's erf rounded to float over [-7, 7] in steps that land
// on both sides of its branches at 1 and 4, and NaN and the infinities kept.
TEST(CodegenNumerics, ErfIsWithinThreeUlpAndKeepsNaNsAndInfinities) {
  std::vector<float> v;
  for (int i = -70000; i <= 70000; ++i) v.push_back(static_cast<float>(i) * 1e-4f);
  for (float tiny = 1e-30f; tiny < 1e-3f; tiny *= 10.f) v.insert(v.end(), {tiny, -tiny});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  v.insert(v.end(), {nan, inf, -inf, 1e30f, -1e30f, -0.f});
  const Tensor x = from_vector(v, {static_cast<int64_t>(v.size())});
  auto m = std::make_shared<Fn>([](const Tensor& t) { return erf(t); });
  const Tensor got = compile(m, {.backend = "cpp"})(x).contiguous();
  const float* g = got.data<float>();
  int64_t worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = static_cast<float>(std::erf(static_cast<double>(v[i])));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(g[i])) << "erf(" << v[i] << ") = " << g[i];
      continue;
    }
    int32_t a, b;
    std::memcpy(&a, &g[i], 4);
    std::memcpy(&b, &want, 4);
    const int64_t ulp = std::abs(static_cast<int64_t>(a) - static_cast<int64_t>(b));
    worst = std::max(worst, ulp);
    EXPECT_LE(ulp, 3) << "erf(" << v[i] << ") = " << g[i] << ", want " << want;
    if (ulp > 3) break;
  }
  EXPECT_LE(worst, 3);
}

TEST(CodegenIsa, InlineProductsMatchEagerAtEveryIsaLevel) {
  // Below AVX-512 a register row is the prelude's struct of narrower vectors (two of 8 floats
  // with AVX, four of 4 without); each level the CPU runs builds its own code in a fresh process.
  int levels = 0;
  for (const char* isa : {"x86-64-v2", "x86-64-v3", "x86-64-v4"}) {
    if (!toolchain::host_supports(isa)) continue;
    ++levels;
    const std::string dir = test::fresh_dir("codegen_isa", isa);
    test::ProcessRun r =
        test::run_model("ZC_CACHE_DIR=" + dir + " ZC_CPU_ISA=" + isa, "--layers 4");
    ASSERT_EQ(r.rc, 0) << isa << ": " << r.out;
    EXPECT_GE(r.num("compiler", "compiler_invocations"), 1) << isa << ": " << r.out;
    EXPECT_LT(std::stod(r.lines["max_diff"]), 1e-5) << isa << ": " << r.out;
  }
  if (levels == 0) GTEST_SKIP() << "not an x86-64 CPU: no ISA levels to build for";
}

TEST(CodegenClang, NumericsAndInlineProductsHoldWithClang) {
  // The generated code's numerics and inline products, built by Clang: this binary's own tests
  // of them in a fresh process with ZC_CXX naming clang++ (CI's compiler is GCC; Clang once
  // gave -FLT_MAX as the max of -infs, its OpenMP reduction's identity).
  const test::ProcessRun which = test::run_shell("command -v clang++");
  if (which.rc != 0 || which.out.empty()) GTEST_SKIP() << "no clang++ on PATH";
  std::string clang = which.out.substr(0, which.out.find('\n'));
  const std::string dir = test::fresh_dir("codegen_clang", "cache");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const test::ProcessRun r =
      test::run_shell("ZC_CXX=" + clang + " ZC_CACHE_DIR=" + dir + " " + self +
                      " --gtest_filter='CodegenNumerics.*:CodegenSource.SmallMatmul*:"
                      "CodegenSource.InlineProducts*:ElementwiseCodegen.*'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("[  PASSED  ]"), std::string::npos) << r.out;
}

// A module with several outputs from one input (the tail tests below).
struct Outputs : nn::Module {
  std::function<std::vector<Tensor>(const Tensor&)> f;
  explicit Outputs(std::function<std::vector<Tensor>(const Tensor&)> f) : f(std::move(f)) {}
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override { return f(in.at(0)); }
};

TEST(CodegenSource, InlineProductsBuildBInRegistersAndRunTheirTailFlat) {
  // seed's Linear, ReLU, sigmoid kernel: B's rows are built in registers (no padded copy of
  // B), and ReLU and the sigmoid run over the 100 values as one loop after the bias.
  auto seed = models::seed_model(2);
  const std::string src = generate(*seed, randn({10, 10})).source.text;
  EXPECT_NE(src.find("const zc_vf16 b = {"), std::string::npos) << src;
  EXPECT_EQ(src.find(" bt["), std::string::npos) << src;
  EXPECT_NE(src.find("for (int64_t e = 0; e < 100; ++e)"), std::string::npos) << src;
  // Against the interpreter: B in either layout, 1 to 16 columns, a batch of products, tails
  // of each transcendental, a tail after a binary op, and a tail whose first value is also an
  // output (stored by the product's kernel, so only what follows it runs flat).
  for (int64_t n : {1, 3, 10, 16}) {
    for (int64_t kdim : {1, 7}) {
      Tensor w = randn({kdim, n}), wt = randn({n, kdim}), b = randn({n});
      const std::string what = "n " + std::to_string(n) + ", k " + std::to_string(kdim);
      auto m = std::make_shared<Outputs>([=](const Tensor& x) -> std::vector<Tensor> {
        Tensor r = relu(matmul(x, w) + b);
        return {sigmoid(matmul(x, w)),
                exp(matmul(x, wt.t()) * 0.5),
                gelu(linear(x, wt, b)),
                r,
                tanh(r),
                erf(matmul(x, w)) + 1.0};
      });
      for (const Tensor& x : {randn({5, kdim}), randn({2, 3, kdim})}) {
        std::vector<Tensor> ref = compile(m, {.backend = "eager"})(std::vector<Tensor>{x});
        std::vector<Tensor> got = compile(m, {.backend = "cpp"})(std::vector<Tensor>{x});
        ASSERT_EQ(got.size(), ref.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i].shape(), ref[i].shape()) << what << ", output " << i;
          EXPECT_TRUE(allclose(got[i], ref[i], kPointwiseTol, 1e-6))
              << what << ", output " << i << ": max diff "
              << max(abs(got[i].to(DType::f64) - ref[i].to(DType::f64))).item<double>();
        }
      }
      Fn one([=](const Tensor& x) { return sigmoid(matmul(x, w)); });
      const std::string tail_src = generate(one, randn({5, kdim})).source.text;
      EXPECT_EQ(tail_src.find(" bt["), std::string::npos) << what << "\n" << tail_src;
      EXPECT_NE(tail_src.find("for (int64_t e = 0; e < " + std::to_string(5 * n) + "; ++e)"),
                std::string::npos)
          << what << "\n"
          << tail_src;
    }
  }
}

TEST(CodegenExtern, ForcedExternOpRunsItsEagerKernel) {
  Fn m([](const Tensor& x) { return exp(x) * 2.0 + 1.0; });
  Tensor x = randn({5, 7});
  auto cap = capture::capture_module(m, x, nullptr, true);
  auto backend = codegen::cpp::make_cpp_backend({.force_extern = {ops::OpId::exp}});
  compiler::reset_stats();
  runtime::CompileContext no_cache(nullptr);
  auto exec = runtime::build_executable(cap.graph, *backend, no_cache);
  EXPECT_EQ(compiler::stats().extern_ops, 1);
  const Tensor* args[] = {&x};
  Tensor got = exec->run(args)[0];
  EXPECT_TRUE(allclose(got, exp(x) * 2.0 + 1.0, 1e-6, 1e-6));
}

TEST(CodegenRuntime, IndexOutOfRangeIsAnError) {
  auto emb = std::make_shared<nn::Embedding>(5, 3);
  auto fast = compile(emb);
  EXPECT_NO_THROW(fast(from_values<int64_t>({0, 4}, {2})));
  try {
    fast(from_values<int64_t>({0, 9}, {2}));
    FAIL() << "expected zc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("embedding"), std::string::npos) << e.what();
  }
}

TEST(CodegenRuntime, OneCompiledModuleFromManyThreads) {
  manual_seed(8);
  auto m = models::seed_model(8);
  auto fast = compile(m);
  Tensor warm = randn({10, 10});
  fast(warm);
  std::vector<Tensor> xs, refs;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(randn({10, 10}));
    refs.push_back((*m)(xs.back()));
  }
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      int good = 0;
      for (int i = 0; i < 200; ++i) good += allclose(fast(xs[t]), refs[t], 1e-5, 1e-6);
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 200) << "thread " << t;
}

// Runs the run_model tool with extra environment; returns its output and exit code.
std::pair<std::string, int> run_tool(const std::string& env) {
  test::ProcessRun r = test::run_model(env + " ZC_FORCE_DISABLE_CACHES=1", "--layers 2");
  return {r.out, r.rc};
}

TEST(CodegenFailures, NoCompilerFallsBackToTheInterpreterWithOneWarning) {
  auto [out, rc] = run_tool("env -u ZC_CXX -u CXX PATH=/nonexistent");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ZC_CXX"), std::string::npos) << out;
  EXPECT_NE(out.find("output "), std::string::npos) << out;
  EXPECT_NE(out.find("\"compiler_invocations\":0"), std::string::npos) << out;
}

TEST(CodegenFailures, RejectedSourceIsAnErrorWithOutputAndKeptSource) {
  std::string dir = std::string(ZC_TEST_TMPDIR) + "/fakecxx";
  std::filesystem::create_directories(dir);
  std::string script = dir + "/fake-c++";
  {
    // Answers discovery like a compiler, then rejects every source it is given.
    std::ofstream f(script);
    f << "#!/bin/sh\n"
         "for a in \"$@\"; do case \"$a\" in --version) echo 'fake-c++ 1.0'; exit 0;; "
         "--help=target) exec c++ \"$@\";; esac; done\n"
         "echo 'fake-c++: error: generated source rejected for this test' >&2\nexit 1\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  auto [out, rc] = run_tool("ZC_CXX=" + script);
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("generated source rejected for this test"), std::string::npos) << out;
  // The message names the kept source file, which exists.
  size_t at = out.find(".cpp");
  ASSERT_NE(at, std::string::npos) << out;
  size_t start = out.rfind(' ', at) + 1;
  std::string path = out.substr(start, at + 4 - start);
  while (!path.empty() && (path.front() == '\'' || path.front() == '"')) path.erase(0, 1);
  EXPECT_TRUE(std::filesystem::exists(path)) << path << "\n" << out;
}

}  // namespace
}  // namespace zc
