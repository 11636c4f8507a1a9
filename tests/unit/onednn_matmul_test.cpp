// Products on a weight kept packed across calls (cpu/onednn_matmul.h, GemmChoice::Library::
// onednn_packed): a weight is converted once per identity, a changed weight (a new version) is
// converted again and the result follows it, memory zc cannot vouch for is never kept, and
// compiled code whose products keep their weights stays right when the weights change.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "capture/capture.h"
#include "cpu/blas.h"
#include "cpu/onednn_matmul.h"
#include "runtime/driver/compile_graph.h"
#include "tensor/assign.h"
#include "test_support.h"
#include "unit/captured_args.h"
#include "util/stats.h"
#include "zc/zc.h"

namespace zc {
namespace {

cpu::WeightIdentity identity_of(const Tensor& t) {
  const Storage& s = *t.impl_ptr()->storage;
  return {s.uid(), s.version()};
}

// C = A B^T through `packed`, as a Linear's product: A [m, k], B [n, k].
Tensor product(const cpu::OnednnMatmul& packed, const Tensor& a, const Tensor& b,
               cpu::WeightIdentity id) {
  Tensor c = Tensor::empty({a.size(0), b.size(0)});
  packed.run(false, true, a.size(0), b.size(0), a.size(1), a.data<float>(), a.size(1),
             b.data<float>(), b.size(1), c.data<float>(), b.size(0), cpu::GemmEpilogue{}, id);
  return c;
}

TEST(OnednnMatmul, AWeightIsKeptFromItsSecondSightUntilItChanges) {
  if (!cpu::onednn_matmul_available()) GTEST_SKIP() << "this build has no oneDNN";
  manual_seed(5);
  const Tensor a = randn({37, 19}), w = randn({23, 19});
  const Tensor want = matmul(a, w.t());
  cpu::OnednnMatmul packed;
  EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want, 1e-5, 1e-5));
  EXPECT_EQ(packed.conversions(), 0);  // first sight: run as given
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want, 1e-5, 1e-5));
  }
  EXPECT_EQ(packed.conversions(), 1);
  EXPECT_EQ(packed.kept(), 1);
  // A new version of the same memory: seen anew, kept again at its second sight, never stale.
  assign_values(w, w * 2.0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want * 2.0, 1e-5, 1e-5)) << i;
  }
  EXPECT_EQ(packed.conversions(), 2);
  // Unknown memory is never kept; a value that changes identity every call never is either.
  for (int i = 0; i < 3; ++i) product(packed, a, w, {});
  for (int i = 0; i < 3; ++i) {
    const Tensor fresh = w.clone();
    EXPECT_TRUE(allclose(product(packed, a, fresh, identity_of(fresh)), want * 2.0, 1e-5, 1e-5));
  }
  EXPECT_EQ(packed.conversions(), 2);
  // Two weights at two addresses are both kept (a block's executable serves every instance).
  const Tensor w2 = randn({23, 19});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(allclose(product(packed, a, w2, identity_of(w2)), matmul(a, w2.t()), 1e-5, 1e-5));
    EXPECT_TRUE(allclose(product(packed, a, w, identity_of(w)), want * 2.0, 1e-5, 1e-5));
  }
  EXPECT_EQ(packed.conversions(), 3);
  EXPECT_GE(packed.kept(), 2);
}

TEST(OnednnMatmul, EveryLayoutEqualsTheProductAsGiven) {
  if (!cpu::onednn_matmul_available()) GTEST_SKIP() << "this build has no oneDNN";
  manual_seed(6);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t m = 9, n = 70, k = 33, pad = 3;
      const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
      const Tensor a = randn({ta ? k : m, lda}), b = randn({tb ? n : k, ldb});
      Tensor want = zeros({m, ldc}), got = zeros({m, ldc});
      cpu::sgemm_on(cpu::GemmLibrary::openblas, ta, tb, m, n, k, a.data<float>(), lda,
                    b.data<float>(), ldb, want.data<float>(), ldc);
      cpu::OnednnMatmul packed(cpu::OnednnMatmul::Keep::first_sight);
      packed.run(ta, tb, m, n, k, a.data<float>(), lda, b.data<float>(), ldb, got.data<float>(),
                 ldc, cpu::GemmEpilogue{}, identity_of(b));
      EXPECT_EQ(packed.conversions(), 1);
      // C's padding columns stay as they were.
      EXPECT_TRUE(allclose(got, want, 1e-5, 1e-5)) << ta << tb;
    }
  }
}

// C = act(A B^T + bias + residual) computed in double, as the reference.
std::vector<double> reference(const Tensor& a, const Tensor& w, const Tensor* bias,
                              const Tensor* residual, cpu::GemmEpilogue::Act act) {
  const int64_t m = a.size(0), n = w.size(0), k = a.size(1);
  std::vector<double> c(static_cast<size_t>(m * n));
  const float* A = a.data<float>();
  const float* W = w.data<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double v = 0;
      for (int64_t x = 0; x < k; ++x) v += double(A[i * k + x]) * W[j * k + x];
      if (bias) v += bias->data<float>()[j];
      if (residual) v += residual->data<float>()[i * n + j];
      switch (act) {
        case cpu::GemmEpilogue::Act::none:
          break;
        case cpu::GemmEpilogue::Act::relu:
          v = v > 0 ? v : 0;
          break;
        case cpu::GemmEpilogue::Act::gelu_tanh:
          v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          break;
        case cpu::GemmEpilogue::Act::gelu_erf:
          v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
          break;
      }
      c[static_cast<size_t>(i * n + j)] = v;
    }
  }
  return c;
}

void expect_near(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  const float* g = got.data<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(g[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

// Every epilogue the call can fuse, on B as given and on a kept B, with the residual apart from
// C or C itself, and with C over A's memory (the path through a separate product): each equals
// the float64 reference.
TEST(OnednnMatmul, EveryEpilogueEqualsTheReference) {
  if (!cpu::onednn_matmul_available()) GTEST_SKIP() << "this build has no oneDNN";
  using Act = cpu::GemmEpilogue::Act;
  manual_seed(8);
  const int64_t m = 33, n = 40, k = 40;
  const Tensor a = randn({m, k}), w = randn({n, k}), bias = randn({n}), res = randn({m, n});
  cpu::OnednnMatmul site;
  for (Act act : {Act::none, Act::relu, Act::gelu_tanh, Act::gelu_erf}) {
    for (int with : {0, 1, 2, 3}) {  // bits: bias, residual
      const bool has_bias = with & 1, has_res = with & 2;
      const std::vector<double> want =
          reference(a, w, has_bias ? &bias : nullptr, has_res ? &res : nullptr, act);
      const std::string what = "act " + std::to_string(int(act)) + " with " + std::to_string(with);
      for (bool keep : {false, true}) {
        for (int call = 0; call < 2; ++call) {  // a kept B from the second call
          Tensor c = zeros({m, n});
          cpu::GemmEpilogue e{has_bias ? bias.data<float>() : nullptr,
                              has_res ? res.data<float>() : nullptr, n, act};
          site.run(false, true, m, n, k, a.data<float>(), k, w.data<float>(), k, c.data<float>(), n,
                   e, keep ? identity_of(w) : cpu::WeightIdentity{});
          expect_near(c, want, what);
        }
      }
      if (has_res) {  // the residual in C itself
        Tensor c = res.clone();
        cpu::GemmEpilogue e{has_bias ? bias.data<float>() : nullptr, c.data<float>(), n, act};
        site.run(false, true, m, n, k, a.data<float>(), k, w.data<float>(), k, c.data<float>(), n,
                 e, {});
        expect_near(c, want, what + " in place");
      }
      // C written over A (a buffer the planner reused once A is dead): A is read first.
      Tensor both = zeros({m, std::max(k, n)});
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t x = 0; x < k; ++x)
          both.data<float>()[i * both.size(1) + x] = a.data<float>()[i * k + x];
      }
      cpu::GemmEpilogue e{has_bias ? bias.data<float>() : nullptr,
                          has_res ? res.data<float>() : nullptr, n, act};
      site.run(false, true, m, n, k, both.data<float>(), both.size(1), w.data<float>(), k,
               both.data<float>(), both.size(1), e, {});
      Tensor got = both.slice(1, 0, n).contiguous();
      expect_near(got, want, what + " over A");
    }
  }
}

// One call site's primitives, made on this thread, run from eight threads at once (a compiled
// module called from many threads): each product equals the reference. Each thread passes its
// own scratchpad; with oneDNN's default a primitive keeps the scratchpad of the thread that made
// it, and the threads' partial sums overwrote each other.
TEST(OnednnMatmul, PrimitivesRunFromManyThreadsAtOnce) {
  if (!cpu::onednn_matmul_available()) GTEST_SKIP() << "this build has no oneDNN";
  using Act = cpu::GemmEpilogue::Act;
  manual_seed(9);
  const int64_t m = 64, n = 256, k = 1024;  // gpt-small's MLP down at batch 1
  const Tensor w = randn({n, k}), bias = randn({n});
  cpu::OnednnMatmul site;
  constexpr int kThreads = 8;
  std::vector<Tensor> as;
  std::vector<std::vector<double>> want;
  for (int t = 0; t < kThreads; ++t) {
    as.push_back(randn({m, k}));
    want.push_back(reference(as.back(), w, &bias, nullptr, Act::gelu_tanh));
  }
  const cpu::GemmEpilogue e{bias.data<float>(), nullptr, n, Act::gelu_tanh};
  Tensor first = zeros({m, n});
  site.run(false, true, m, n, k, as[0].data<float>(), k, w.data<float>(), k, first.data<float>(), n,
           e, {});
  expect_near(first, want[0], "made here");
  std::vector<int> wrong(kThreads, 0);  // per thread: products off the reference
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) {
        Tensor c = zeros({m, n});
        site.run(false, true, m, n, k, as[t].data<float>(), k, w.data<float>(), k, c.data<float>(),
                 n, e, {});
        const float* g = c.data<float>();
        for (size_t i = 0; i < want[t].size(); ++i) {
          if (std::abs(g[i] - want[t][i]) > 1e-4 * (1 + std::abs(want[t][i]))) {
            ++wrong[t];
            break;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t << " of 20 runs";
}

// Compiled code whose products keep their weights packed: right at every call, and right
// after the weight changes between calls.
TEST(OnednnMatmul, CompiledProductsFollowAChangedWeight) {
  if (!cpu::onednn_matmul_available()) GTEST_SKIP() << "this build has no oneDNN";
  NoGradGuard no_grad;
  manual_seed(7);
  const std::vector<Tensor> in{randn({4, 96, 64}), randn({80, 64})};
  const capture::Captured cap = capture::capture_function(
      in, [&] { return std::vector<Tensor>{gelu(matmul(in[0], in[1].t()))}; });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  runtime::CompileContext ctx;
  auto exec = runtime::compile_graph(cap.graph, cpp, ctx);
  const std::vector<const Tensor*> args = test::captured_args(cap, in);
  const std::vector<codegen::LibraryProduct> products = exec->library_products();
  ASSERT_EQ(products.size(), 1u);
  EXPECT_TRUE(products[0].problem.b_weight) << products[0].problem.str();
  std::vector<uint8_t> choices = exec->product_choices();
  choices[static_cast<size_t>(products[0].site)] =
      cpu::GemmChoice{cpu::GemmChoice::Library::onednn_packed}.code();
  auto tuned = exec->with_product_choices(choices);
  auto kept = [] { return zc::stats::read(zc::stats::Counter::weights_kept); };
  const int64_t before = kept();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(tuned->run(args)[0], exec->run(args)[0], 1e-5, 1e-5)) << i;
  }
  EXPECT_EQ(kept() - before, 1);  // at the second call, once
  assign_values(in[1], in[1] * -0.5);
  const Tensor want = gelu(matmul(in[0], in[1].t()));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(allclose(tuned->run(args)[0], want, 1e-4, 1e-4)) << i;
  EXPECT_EQ(kept() - before, 2);
  // A B that is a new tensor at every call (an activation passed in) is never kept.
  for (int i = 0; i < 3; ++i) {
    const std::vector<Tensor> fresh{in[0], in[1].clone()};
    EXPECT_TRUE(allclose(tuned->run(test::captured_args(cap, fresh))[0], want, 1e-4, 1e-4));
  }
  EXPECT_EQ(kept() - before, 2);
}

// Graphs whose products' epilogues the call runs (bias, residual, ReLU, GELU both ways) equal
// eager under the default choice, a kept B and OpenBLAS (the epilogue after the product).
TEST(OnednnMatmul, CompiledEpiloguesEqualEagerUnderEveryLibrary) {
  NoGradGuard no_grad;
  manual_seed(9);
  const std::vector<Tensor> in{randn({4, 96, 64}), randn({80, 64}), randn({80}),
                               randn({4, 96, 80})};
  const Tensor &x = in[0], &w = in[1], &b = in[2], &r = in[3];
  const std::vector<std::pair<std::string, std::function<Tensor()>>> graphs = {
      {"gelu tanh (x W^T + b)", [&] { return gelu(matmul(x, w.t()) + b, GeluApprox::tanh); }},
      {"gelu erf (b + x W^T)", [&] { return gelu(b + matmul(x, w.t())); }},
      {"relu (x W^T + b + r)", [&] { return relu(matmul(x, w.t()) + b + r); }},
      {"r + (x W^T + b)", [&] { return r + (matmul(x, w.t()) + b); }},
      {"x W^T + r", [&] { return matmul(x, w.t()) + r; }},
  };
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  runtime::CompileContext ctx;
  for (const auto& [name, fn] : graphs) {
    const capture::Captured cap =
        capture::capture_function(in, [&] { return std::vector<Tensor>{fn()}; });
    auto exec = runtime::compile_graph(cap.graph, cpp, ctx);
    const std::vector<const Tensor*> args = test::captured_args(cap, in);
    const Tensor want = fn();
    EXPECT_TRUE(allclose(exec->run(args)[0], want, 1e-4, 1e-4)) << name;
    const std::vector<codegen::LibraryProduct> products = exec->library_products();
    ASSERT_EQ(products.size(), 1u) << name;
    for (auto lib : {cpu::GemmChoice::Library::onednn_packed, cpu::GemmChoice::Library::openblas}) {
      std::vector<uint8_t> choices = exec->product_choices();
      choices[static_cast<size_t>(products[0].site)] = cpu::GemmChoice{lib}.code();
      auto tuned = exec->with_product_choices(choices);
      for (int call = 0; call < 3; ++call) {
        EXPECT_TRUE(allclose(tuned->run(args)[0], want, 1e-4, 1e-4))
            << name << " on " << cpu::GemmChoice{lib}.str(1) << ", call " << call;
      }
    }
  }
}

}  // namespace
}  // namespace zc
