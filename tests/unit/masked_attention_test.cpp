// Attention with a mask and grouped-query heads (ops/attention.cpp's fourth input, the
// frontend's enable_gqa): eagerly, through its decomposition and through the C++ backend's
// fused kernel against a float64 reference over masks of every broadcast (boolean and
// additive, rows that see no key, with the causal limit, several key blocks); grouped heads
// against the same keys repeated; gradients against the composite ops of the definition; bad
// masks as errors; and on CUDA, the keys form (attention_keys.cpp): NVRTC builds it wherever
// NVRTC is (CI), and on a GPU it equals the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "ops/registry.h"
#include "runtime/driver/compile_graph.h"
#include "unit/captured_args.h"
#include "unit/op_programs.h"
#include "unit/reference.h"
#include "unit/test_support.h"
#include "zc/zc.h"

#if ZC_WITH_CUDA
#include "unit/sm90_backend.h"
#endif

namespace zc {
namespace {

using ref::Arr;

struct Case {
  Shape q, k, v, mask;
  bool keeps = true;  // a boolean mask, else an additive one
  bool causal = false;
  int64_t hidden_row = -1;  // a query row of the mask that sees no key
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      {{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, {2, 1, 5, 7}, true, false, 2},
      {{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, {5, 7}, false, false, 4},
      {{1, 2, 7, 4}, {1, 2, 7, 4}, {1, 2, 7, 4}, {1, 1, 1, 7}, true, true},
      {{1, 4, 8, 16}, {1, 4, 40, 16}, {1, 4, 40, 16}, {1, 1, 1, 40}, true, false},
      // more keys than one CPU block (256) and than the GPU's four warps take in one turn
      {{1, 2, 3, 32}, {1, 2, 300, 32}, {1, 2, 300, 32}, {1, 2, 3, 300}, true, false},
      {{1, 2, 70, 16}, {1, 2, 600, 16}, {1, 2, 600, 16}, {70, 600}, false, true},
  };
  return all;
}

// A mask of `c.mask`'s shape: about a third of the keys hidden (boolean) or -inf (additive),
// the rest uniform in [-1, 1]; row c.hidden_row hides every key.
Tensor make_mask(const Case& c) {
  Arr u = ref::uniform(c.mask, 0, 1);
  const int64_t tq = c.mask[c.mask.size() - 2], tk = c.mask.back();
  for (int64_t i = 0; i < u.numel(); ++i) {
    if ((i / tk) % tq == c.hidden_row) u.v[i] = 0;
  }
  const Tensor x = ref::make(u, DType::f64);
  if (c.keeps) return gt(x, 0.3);
  return where(gt(x, 0.3), x * 3.0 - 2.0, full({}, -INFINITY, DType::f64)).to(DType::f32);
}

// The mask as the reference takes it: additive, dense over q's batch.
Arr additive(const Tensor& mask, const Case& c) {
  Shape s(c.q.begin(), c.q.end() - 1);
  s.push_back(c.k[c.k.size() - 2]);
  Tensor m = mask.expand(s);
  if (mask.dtype() == DType::boolean) {
    m = where(m, zeros({}, DType::f64), full({}, -INFINITY, DType::f64));
  }
  return ref::read(m);
}

// k or v expanded to q's batch dims, as the reference reads them.
Arr full_batch(const Tensor& t, const Case& c) {
  Shape s(c.q.begin(), c.q.end() - 2);
  s.insert(s.end(), t.shape().end() - 2, t.shape().end());
  return ref::read(t.expand(s));
}

Tensor compiled_cpu(std::span<const Tensor> in, const std::function<Tensor()>& fn) {
  capture::Captured cap = capture::capture_function(in, [&] { return std::vector<Tensor>{fn()}; });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  runtime::CompileContext ctx;
  return runtime::compile_graph(cap.graph, cpp, ctx)->run(test::captured_args(cap, in))[0];
}

ref::Tol tol(DType dt, int64_t keys) {
  const double t = 8 * ref::unit_roundoff(dt) * (2 + std::sqrt(static_cast<double>(keys)));
  return {t, t};
}

TEST(MaskedAttention, EagerAndCompiledEqualTheReference) {
  manual_seed(17);
  for (const Case& c : cases()) {
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      SCOPED_TRACE(ref::show(c.q) + ref::show(c.k) + " mask " + ref::show(c.mask) +
                   (c.keeps ? " bool" : " additive") + (c.causal ? " causal " : " ") +
                   ref::name_of(dt));
      Arr q = ref::uniform(c.q, -2, 2), k = ref::uniform(c.k, -2, 2), v = ref::uniform(c.v, -1, 1);
      const Tensor mask = make_mask(c);
      std::vector<Tensor> in{ref::make(q, dt), ref::make(k, dt), ref::make(v, dt), mask};
      auto f = [&] {
        return scaled_dot_product_attention(in[0], in[1], in[2], in[3], c.causal, 0.4);
      };
      const Arr want =
          ref::attention_masked(ref::read(in[0]), full_batch(in[1], c), full_batch(in[2], c),
                                additive(mask, c), c.causal, 0.4);
      const ref::Tol t = tol(dt, c.k[c.k.size() - 2]);
      EXPECT_TRUE(ref::close(f(), want, dt, t)) << "eager";
      EXPECT_TRUE(ref::close(compiled_cpu(in, f), want, dt, t)) << "compiled";
      // The decomposition (what a backend without the fused kernel runs), eagerly.
      const Tensor decomposed =
          ops::op_def(ops::OpId::attention).decompose(in, ops::AttentionAttrs{c.causal, 0.4})[0];
      EXPECT_TRUE(ref::close(decomposed, want, dt, t)) << "decomposed";
    }
  }
}

TEST(MaskedAttention, TheCpuKernelIsOneKernelReadingTheMask) {
  manual_seed(2);
  std::vector<Tensor> in{randn({1, 4, 8, 16}), randn({1, 4, 40, 16}), randn({1, 4, 40, 16}),
                         gt(rand({1, 1, 1, 40}), 0.5)};
  capture::Captured cap = capture::capture_function(in, [&] {
    return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2], in[3])};
  });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  lower::LowerContext lc;
  lc.keep = cpp.native_ops();
  codegen::CodegenResult code = codegen::codegen(lower::lower(cap.graph, lc), cpp);
  ASSERT_EQ(code.schedule.kernels.size(), 1u);
  EXPECT_EQ(code.schedule.kernels[0].kind, codegen::KernelKind::attention);
}

// The queries of a group of heads against their shared key-value head equal the keys and
// values repeated per head (torch's enable_gqa), eagerly and compiled, at one query (a decode
// step) and several (a prefill), with a mask broadcast over the heads.
TEST(MaskedAttention, GroupedQueryHeadsEqualRepeatedKeys) {
  manual_seed(23);
  for (int64_t t : {1, 4}) {
    SCOPED_TRACE("T " + std::to_string(t));
    const int64_t s = 9;
    std::vector<Tensor> in{randn({2, 6, t, 8}), randn({2, 2, s, 8}), randn({2, 2, s, 8}),
                           gt(rand({2, 1, t, s}), 0.3)};
    auto repeat = [&](const Tensor& x) {
      return x.reshape({2, 2, 1, s, 8}).expand({2, 2, 3, s, 8}).reshape({2, 6, s, 8});
    };
    const Tensor want =
        scaled_dot_product_attention(in[0], repeat(in[1]), repeat(in[2]), in[3], true);
    auto f = [&] {
      return scaled_dot_product_attention(in[0], in[1], in[2], in[3], true, std::nullopt, true);
    };
    EXPECT_TRUE(allclose(f(), want, 1e-5, 1e-5)) << "eager";
    EXPECT_TRUE(allclose(compiled_cpu(in, f), want, 1e-5, 1e-5)) << "compiled";
  }
}

// Gradients of q, k, v and an additive mask equal those of the definition written as
// composite ops (every row sees a key, where the composite softmax is defined).
TEST(MaskedAttention, GradientsEqualTheCompositeDefinition) {
  manual_seed(29);
  for (bool keeps : {false, true}) {
    SCOPED_TRACE(keeps ? "bool" : "additive");
    const Tensor q0 = randn({2, 2, 5, 4}, DType::f64), k0 = randn({2, 2, 6, 4}, DType::f64);
    const Tensor v0 = randn({2, 2, 6, 3}, DType::f64), w = randn({2, 2, 5, 3}, DType::f64);
    Tensor keep = gt(rand({2, 1, 5, 6}, DType::f64), 0.4);
    keep = gt(where(eq(arange(6).reshape({1, 1, 1, 6}), 0), full({}, 1.0, DType::f64),
                    cast(keep, DType::f64)),
              0.5);  // key 0 always seen
    const Tensor add0 = keeps ? Tensor() : randn({5, 6}, DType::f64);
    auto grads = [&](bool fused) {
      Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_();
      Tensor v = v0.clone().requires_grad_();
      Tensor add = keeps ? Tensor() : add0.clone().requires_grad_();
      Tensor y;
      if (fused) {
        y = scaled_dot_product_attention(q, k, v, keeps ? keep : add, true, 0.5);
      } else {
        Tensor s = matmul(q, k.transpose(-2, -1)) * 0.5;
        s = where(le(arange(6).reshape({1, 6}), arange(5).reshape({5, 1})), s,
                  full({}, -INFINITY, DType::f64));
        s = keeps ? where(keep, s, full({}, -INFINITY, DType::f64)) : s + add;
        y = matmul(softmax(s, -1), v);
      }
      sum(y * w).backward();
      std::vector<Tensor> g{q.grad(), k.grad(), v.grad()};
      if (!keeps) g.push_back(add.grad());
      return g;
    };
    const std::vector<Tensor> got = grads(true), want = grads(false);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(got[i].defined()) << "input " << i;
      EXPECT_TRUE(allclose(got[i], want[i], 1e-9, 1e-9)) << "input " << i;
    }
  }
}

TEST(MaskedAttention, BadMasksAndGroupsAreErrorsNamingThem) {
  const Tensor q = randn({1, 4, 3, 8}), k = randn({1, 2, 5, 8}), v = randn({1, 2, 5, 8});
  auto raises = [](const std::function<void()>& f, const std::string& words) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one naming " << words;
    } catch (const Error& e) {
      EXPECT_TRUE(test::contains(e.what(), words)) << e.what();
    }
  };
  raises(
      [&] {
        scaled_dot_product_attention(q, q, q, zeros({3, 3}, DType::i64), false);
      },
      "expected a boolean mask");
  raises(
      [&] {
        scaled_dot_product_attention(q, q, q, gt(rand({3, 4}), 0.5));
      },
      "broadcasts to [1,4,3,3]");
  raises(
      [&] {
        scaled_dot_product_attention(q, k, v, gt(rand({2, 1, 3, 5}), 0.5), false, std::nullopt,
                                     true);
      },
      "broadcasts");
  raises(
      [&] {
        scaled_dot_product_attention(q, randn({1, 3, 5, 8}), randn({1, 3, 5, 8}), Tensor(), false,
                                     std::nullopt, true);
      },
      "H a multiple of Hkv");
}

#if ZC_WITH_CUDA

// The keys form: one attention kernel whose source has the warps' shared states, built by
// NVRTC for each float dtype and head dims up to 128, with and without 16-byte key reads (runs
// wherever NVRTC does: CI).
TEST(MaskedAttentionCuda, BuildsInTheKeysForm) {
  auto backend = test::sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  for (int64_t d : {64, 128, 20}) {
    for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
      SCOPED_TRACE("d " + std::to_string(d) + " " + std::string(dtype_name(dt)));
      std::vector<Tensor> in{randn({1, 4, 8, d}).to(dt), randn({1, 4, 300, d}).to(dt),
                             randn({1, 4, 300, d}).to(dt), gt(rand({1, 1, 1, 300}), 0.5)};
      capture::Captured cap = capture::capture_function(in, [&] {
        return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2], in[3])};
      });
      lower::LowerContext lc;
      lc.keep = backend->native_ops();
      codegen::CodegenResult code = codegen::codegen(lower::lower(cap.graph, lc), *backend);
      ASSERT_EQ(code.schedule.kernels.size(), 1u);
      EXPECT_EQ(code.schedule.kernels[0].kind, codegen::KernelKind::attention);
      EXPECT_TRUE(test::contains(code.source.text, "zc_wacc")) << code.source.text;
      // Keys read in 16-byte chunks where the head dim is a multiple of a chunk.
      const bool chunks = d % static_cast<int64_t>(16 / dtype_size(dt)) == 0;
      EXPECT_EQ(test::contains(code.source.text, "zc_kc["), chunks) << code.source.text;
      EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source))) << code.source.text;
    }
  }
}

// On a GPU, compiled: every case above (f32 and bf16) equals the CPU's eager result, and a
// decode step's grouped heads over a bf16 cache with a mask broadcast over its rows.
TEST(MaskedAttentionCuda, CompiledEqualsTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(31);
  for (const Case& c : cases()) {
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(ref::show(c.q) + ref::show(c.k) + " mask " + ref::show(c.mask) +
                   (c.keeps ? " bool" : " additive") + (c.causal ? " causal " : " ") +
                   std::string(dtype_name(dt)));
      std::vector<Tensor> cpu{randn(c.q).to(dt), randn(c.k).to(dt), randn(c.v).to(dt),
                              make_mask(c)};
      std::vector<Tensor> gpu;
      for (const Tensor& t : cpu) gpu.push_back(t.to(Device::cuda(0)));
      auto f = [&](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], x[3], c.causal, 0.4);
      };
      auto fast = compile(std::make_shared<test::Fn>([&, f](const Tensor& q) {
        return f({q, gpu[1], gpu[2], gpu[3]});
      }));
      const Tensor got = fast(gpu[0]).to(Device::cpu()).to(DType::f32);
      const Tensor want = f(cpu).to(DType::f32);
      const double t = dt == DType::f32 ? 1e-5 : 2e-2;
      EXPECT_TRUE(allclose(got, want, t, t));
    }
  }
}

#endif  // ZC_WITH_CUDA

}  // namespace
}  // namespace zc
