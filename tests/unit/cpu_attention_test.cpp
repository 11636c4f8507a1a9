// The C++ backend's attention kernel (codegen/backends/cpp/attention.cpp): compiled
// scaled_dot_product_attention against a float64 reference over shapes that take each of its
// paths (several key blocks, a partial query block, causal limits inside a block, broadcast
// batch dims, odd head dims, no keys), operands read in place (strided views, column-major)
// and through its staged copies (16-bit storage, layouts BLAS cannot read), and the schedule:
// one kernel, no [Tq, Tk] scores in memory.
#include <gtest/gtest.h>

#include <cmath>
#include "unit/attention_cases.h"

#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "ops/dispatch.h"
#include "runtime/driver/compile_graph.h"
#include "unit/captured_args.h"
#include "unit/reference.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using ref::Arr;

// Runs `fn` over `in` compiled by the C++ backend.
Tensor compiled(std::span<const Tensor> in, const std::function<Tensor()>& fn) {
  capture::Captured cap = capture::capture_function(in, [&] { return std::vector<Tensor>{fn()}; });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  runtime::CompileContext ctx;
  auto exec = runtime::compile_graph(cap.graph, cpp, ctx);
  return exec->run(test::captured_args(cap, in))[0];
}

// The C++ backend's source for `fn` over `in`.
std::string source_of(std::span<const Tensor> in, const std::function<Tensor()>& fn) {
  capture::Captured cap = capture::capture_function(in, [&] { return std::vector<Tensor>{fn()}; });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  lower::LowerContext lc;
  lc.keep = cpp.native_ops();
  return codegen::codegen(lower::lower(cap.graph, lc), cpp).source.text;
}

// Tolerance of a softmax-weighted average over `keys` keys of products over `dims` dims.
ref::Tol tol(DType dt, int64_t keys, int64_t dims) {
  const double t = 8 * ref::unit_roundoff(dt) * (2 + std::sqrt(static_cast<double>(keys + dims)));
  return {t, t};
}

TEST(CpuAttention, EqualsTheReferenceOverShapes) {
  manual_seed(41);
  const std::vector<test::AttentionCase> cases{
      {{2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, false, std::nullopt},
      {{2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, true, 0.3},
      // a partial query block (130 = 64 + 64 + 2) over three key blocks (600 > 2 x 256)
      {{1, 2, 130, 16}, {1, 2, 600, 16}, {1, 2, 600, 7}, false, std::nullopt},
      // causal: rows whose limit falls inside a key block, and key blocks a row does not see
      {{1, 2, 300, 8}, {1, 2, 300, 8}, {1, 2, 300, 8}, true, std::nullopt},
      {{1, 1, 70, 8}, {1, 1, 520, 8}, {1, 1, 520, 3}, true, 0.7},  // fewer queries than keys
      {{2, 3, 70, 5}, {1, 1, 90, 5}, {3, 90, 3}, false, 1.3},      // broadcast batch dims
      {{2, 6, 8}, {2, 6, 8}, {2, 6, 3}, true, std::nullopt},       // 3-D
      {{1, 1, 8}, {1, 1, 8}, {1, 1, 8}, true, std::nullopt},       // one token
  };
  for (const test::AttentionCase& c : cases) {
    for (DType dt : ref::float_dtypes()) {
      SCOPED_TRACE(ref::show(c.q) + ref::show(c.k) + ref::show(c.v) +
                   " causal=" + std::to_string(c.causal) + " " + ref::name_of(dt));
      Arr q = ref::uniform(c.q, -2, 2), k = ref::uniform(c.k, -2, 2), v = ref::uniform(c.v, -1, 1);
      std::vector<Tensor> in{ref::make(q, dt), ref::make(k, dt), ref::make(v, dt)};
      Tensor y = compiled(
          in, [&] { return scaled_dot_product_attention(in[0], in[1], in[2], c.causal, c.scale); });
      // The reference takes whole batches: k and v expanded to q's (every case's full one).
      auto full = [&](const Tensor& t) {
        Shape s(c.q.begin(), c.q.end() - 2);
        s.insert(s.end(), t.shape().end() - 2, t.shape().end());
        return ref::read(t.expand(s));
      };
      Arr want = ref::attention(ref::read(in[0]), full(in[1]), full(in[2]), c.causal, c.scale);
      EXPECT_TRUE(ref::close(y, want, dt, tol(dt, c.k[c.k.size() - 2], c.q.back())));
    }
  }
}

TEST(CpuAttention, ReadsViewsInPlaceOrThroughItsCopies) {
  manual_seed(42);
  const int64_t B = 2, T = 150, H = 3, D = 16;
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(ref::name_of(dt));
    // q from [B, T, H, D] (a head's rows 48 apart, read in place); k given as [B, H, D, T] and
    // transposed (column-major rows, read in place); v given as [D, T, B * H] and permuted
    // (unit stride along neither matrix dim: copied).
    Arr q = ref::uniform({B, T, H, D}, -1, 1), k = ref::uniform({B, H, D, T}, -1, 1);
    Arr v = ref::uniform({D, T, B * H}, -1, 1);
    std::vector<Tensor> in{ref::make(q, dt), ref::make(k, dt), ref::make(v, dt)};
    auto views = [&] {
      return std::vector<Tensor>{in[0].transpose(1, 2), in[1].transpose(-2, -1),
                                 in[2].permute({2, 1, 0}).reshape({B, H, T, D})};
    };
    for (bool causal : {false, true}) {
      auto fn = [&] {
        auto o = views();
        return scaled_dot_product_attention(o[0], o[1], o[2], causal);
      };
      // Staged blocks are the scratch areas zc_qs, zc_ks, zc_vs; in-place ones have none.
      const std::string src = source_of(in, fn);
      const bool half = dt == DType::bf16;
      EXPECT_EQ(src.find("zc_qs") != std::string::npos, half);
      EXPECT_EQ(src.find("zc_ks") != std::string::npos, half);
      EXPECT_NE(src.find("zc_vs"), std::string::npos);
      Tensor y = compiled(in, fn);
      auto o = views();
      Arr want =
          ref::attention(ref::read(o[0]), ref::read(o[1]), ref::read(o[2]), causal, std::nullopt);
      EXPECT_TRUE(ref::close(y, want, dt, tol(dt, T, D))) << "causal " << causal;
    }
  }
}

// attention_lse, the training forward's: each query row's log-sum-exp of its scaled, visible
// scores, against float64, over several key blocks, causal limits inside them, and no keys.
TEST(CpuAttention, LogSumExpEqualsTheReference) {
  manual_seed(43);
  struct Case {
    Shape q, k;
    bool causal;
    double scale;
  };
  const std::vector<Case> cases{{{2, 3, 70, 8}, {2, 3, 600, 8}, false, 0.35},
                                {{1, 2, 300, 16}, {1, 2, 300, 16}, true, 0.25},
                                {{1, 5, 4}, {1, 0, 4}, false, 1.0}};
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(ref::show(c.q) + ref::show(c.k) + " causal=" + std::to_string(c.causal) + " " +
                   ref::name_of(dt));
      std::vector<Tensor> in{ref::make(ref::uniform(c.q, -2, 2), dt),
                             ref::make(ref::uniform(c.k, -2, 2), dt)};
      Tensor got = compiled(in, [&] {
        return ops::call1(ops::OpId::attention_lse, {in[0], in[1]},
                          ops::AttentionAttrs{c.causal, c.scale});
      });
      const Arr q = ref::read(in[0]), k = ref::read(in[1]);
      const int64_t tq = c.q[c.q.size() - 2], tk = c.k[c.k.size() - 2], d = c.q.back();
      const int64_t rows = ref::numel_of(c.q) / d;
      ASSERT_EQ(got.numel(), rows);
      const Tensor g = got.to(DType::f64).contiguous();
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t batch = r / tq, t = r % tq;
        double m = -INFINITY, sum = 0;
        std::vector<double> s;
        for (int64_t j = 0; j < tk && (!c.causal || j <= t); ++j) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) dot += q.v[r * d + x] * k.v[(batch * tk + j) * d + x];
          s.push_back(dot * c.scale);
          m = std::max(m, s.back());
        }
        for (double x : s) sum += std::exp(x - m);
        const double want = s.empty() ? -INFINITY : m + std::log(sum);
        const double have = g.data<double>()[r];
        if (std::isinf(want)) {
          EXPECT_EQ(have, want) << "row " << r;
        } else {
          EXPECT_NEAR(have, want, (dt == DType::f32 ? 1e-5 : 1e-12) * (1 + std::fabs(want)))
              << "row " << r;
        }
      }
    }
  }
}

TEST(CpuAttention, NoKeysGiveZerosAndNaNsPropagate) {
  Tensor q = randn({1, 3, 4}), none = zeros({1, 0, 4});
  std::vector<Tensor> in{q, none};
  Tensor y = compiled(in, [&] { return scaled_dot_product_attention(in[0], in[1], in[1]); });
  EXPECT_TRUE(allclose(y, zeros({1, 3, 4}), 0, 0));
  // A NaN in a key poisons every row that sees it, as in the eager kernel; rows before it
  // (causal) stay finite.
  Tensor k = randn({1, 5, 4});
  k.data<float>()[2 * 4] = std::nanf("");
  std::vector<Tensor> in2{randn({1, 5, 4}), k, randn({1, 5, 4})};
  Tensor z =
      compiled(in2, [&] { return scaled_dot_product_attention(in2[0], in2[1], in2[2], true); });
  for (int64_t t = 0; t < 5; ++t) {
    for (int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(std::isnan(z.data<float>()[t * 4 + j]), t >= 2) << "row " << t << " col " << j;
  }
}

TEST(CpuAttention, IsOneKernelWithNoScoresInMemory) {
  // One head of 1024 queries and keys: the scores alone would be 4 MB.
  std::vector<Tensor> in{randn({1, 1024, 32}), randn({1, 1024, 32}), randn({1, 1024, 32})};
  capture::Captured cap = capture::capture_function(in, [&] {
    return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2], true) * 2.0};
  });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  lower::LowerContext lc;
  lc.keep = cpp.native_ops();
  codegen::CodegenResult code = codegen::codegen(lower::lower(cap.graph, lc), cpp);
  int attention = 0, products = 0;
  for (const codegen::Kernel& k : code.schedule.kernels) {
    attention += k.kind == codegen::KernelKind::attention;
    products += k.kind == codegen::KernelKind::matmul;
  }
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(products, 0);
  EXPECT_LT(code.plan.arena_bytes, 1024 * 1024 * 4);
  EXPECT_NE(code.source.text.find("_attention(const ZcArgs* a)"), std::string::npos);
}

}  // namespace
}  // namespace zc
