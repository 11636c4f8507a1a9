// The ops attention's derivative is made of (attention_lse, attention_grad:
// src/ops/attention_grad.cpp): their eager kernels against their decompositions (what the CPU
// backend compiles) and against the gradients written out with ordinary ops through softmax (as
// the derivative was before them), in f32 and f64, over the shapes at the edges: causal and
// not, Tq != Tk either way, broadcast batch dims, size-1 dims, strided operands, an empty key
// or query length. Also their shape errors, their attributes, and that neither has a
// derivative. Finite differences of attention itself are in derivatives_test.cpp.
#include <gtest/gtest.h>

#include <limits>

#include "ir/graph.h"
#include "lower/autodiff.h"
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "test_support.h"
#include "unit/attention_grad_ops.h"
#include "util/bytes.h"
#include "zc/zc.h"

namespace zc {
namespace {

using ops::AttentionAttrs;
using ops::AttentionGradAttrs;
using ops::AttentionWrt;
using ops::OpId;

using test::grad_op;
using test::kEveryWrt;
using test::lse_op;

std::vector<Tensor> grad_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& lse, const Tensor& delta) {
  return {q, k, v, g, lse, delta};
}

Tensor decomposed(OpId id, const std::vector<Tensor>& in, const ops::Attrs& attrs) {
  return ops::op_def(id).decompose(in, attrs)[0];
}

// The scores softmax turns into probabilities, in f64, masked as the ops do.
Tensor scores(const Tensor& q, const Tensor& k, bool causal, double scale) {
  Tensor s = matmul(q.to(DType::f64), k.to(DType::f64).transpose(-2, -1)) * scale;
  if (!causal) return s;
  const int64_t tq = q.size(-2), tk = k.size(-2);
  Tensor mask = le(arange(tk).reshape({1, tk}), arange(tq).reshape({tq, 1}));
  return where(mask, s, full({}, -std::numeric_limits<double>::infinity(), DType::f64));
}

// dq, dk, dv in f64 through softmax, each summed to its operand's shape (the old derivative).
struct Grads {
  Tensor dq, dk, dv;
};
Grads reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, bool causal,
                double scale) {
  Tensor p = softmax(scores(q, k, causal, scale), -1);
  Tensor g64 = g.to(DType::f64), v64 = v.to(DType::f64);
  Tensor dp = matmul(g64, v64.transpose(-2, -1));
  Tensor ds = p * (dp - sum(dp * p, {-1}, true)) * scale;
  return {ops::sum_to(matmul(ds, k.to(DType::f64)), q.shape()),
          ops::sum_to(matmul(ds.transpose(-2, -1), q.to(DType::f64)), k.shape()),
          ops::sum_to(matmul(p.transpose(-2, -1), g64), v.shape())};
}

struct Shapes {
  Shape q, k, v;
  const char* what;
};
const Shapes kShapes[] = {
    {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 6}, "square"},
    {{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, "more keys than queries"},
    {{7, 4}, {3, 4}, {3, 2}, "more queries than keys, no batch"},
    {{2, 1, 5, 8}, {3, 6, 8}, {1, 6, 4}, "batch dims broadcast"},
    {{1, 1, 4}, {1, 1, 4}, {1, 1, 3}, "one token"},
    {{2, 1, 1, 3}, {1, 2, 1, 3}, {2, 2, 1, 3}, "size-1 dims"},
};

// A leaf of `shape` whose last two dims are a transpose (strided, not contiguous).
Tensor transposed(const Shape& shape, DType dt) {
  Shape t = shape;
  std::swap(t[t.size() - 1], t[t.size() - 2]);
  return randn(t).to(dt).transpose(-2, -1);
}

double tol_of(DType dt) {
  return dt == DType::f64 ? 1e-10 : 2e-4;
}

TEST(AttentionGrad, EagerMatchesTheDecompositionAndTheSoftmaxGradients) {
  manual_seed(71);
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Shapes& c : kShapes) {
      for (bool causal : {false, true}) {
        for (double scale : {0.35, 1.0}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.what + (causal ? " causal" : "") +
                       " scale " + std::to_string(scale));
          // Strided q and g, a sliced k: the kernels read any layout.
          Tensor q = transposed(c.q, dt), v = randn(c.v).to(dt);
          Shape wide = c.k;
          wide[wide.size() - 2] *= 2;
          Tensor k = randn(wide).to(dt).slice(-2, 0, wide[wide.size() - 2], 2);
          Tensor o = scaled_dot_product_attention(q, k, v, causal, scale);
          Tensor g = transposed(o.shape(), dt);
          const double tol = tol_of(dt);

          Tensor lse = lse_op(q, k, causal, scale);
          EXPECT_EQ(lse.dtype(), dt);
          Tensor s = scores(q, k, causal, scale);
          Tensor m = amax(s, {-1}, true);
          Tensor want_lse = (m + log(sum(exp(s - m), {-1}, true))).squeeze(-1);
          EXPECT_TRUE(allclose(lse.to(DType::f64), want_lse, tol, tol));
          EXPECT_TRUE(
              allclose(decomposed(OpId::attention_lse, {q, k}, AttentionAttrs{causal, scale}), lse,
                       tol, tol));

          Tensor delta = sum(g * o, {-1});
          const std::vector<Tensor> in = grad_inputs(q, k, v, g, lse, delta);
          const Grads want = reference(q, k, v, g, causal, scale);
          std::vector<Tensor> got;
          for (AttentionWrt wrt : kEveryWrt) {
            SCOPED_TRACE(std::string("wrt ") + ops::attention_wrt_name(wrt));
            Tensor e = grad_op(in, causal, scale, wrt);
            EXPECT_EQ(e.dtype(), dt);
            Tensor d = decomposed(OpId::attention_grad, in, AttentionGradAttrs{causal, scale, wrt});
            EXPECT_EQ(d.shape(), e.shape());
            EXPECT_TRUE(allclose(d, e, tol, tol));
            got.push_back(e);
          }
          EXPECT_TRUE(allclose(ops::sum_to(got[0], q.shape()).to(DType::f64), want.dq, tol, tol));
          EXPECT_TRUE(allclose(ops::sum_to(got[1], k.shape()).to(DType::f64), want.dk, tol, tol));
          EXPECT_TRUE(allclose(ops::sum_to(got[2], v.shape()).to(DType::f64), want.dv, tol, tol));
          // kv: dk's columns, then dv's, as the two apart.
          const int64_t d = q.size(-1);
          EXPECT_TRUE(allclose(got[3].slice(-1, 0, d), got[1], 1e-6, 1e-7));
          EXPECT_TRUE(allclose(got[3].slice(-1, d, got[3].size(-1)), got[2], 1e-6, 1e-7));
        }
      }
    }
  }
}

// 16-bit operands compute in f32 and give f32; lse and delta may broadcast over the batch.
TEST(AttentionGrad, HalfOperandsComputeInFloatAndLseBroadcasts) {
  manual_seed(72);
  Tensor q = randn({2, 3, 6, 8}), k = randn({2, 3, 6, 8}), v = randn({2, 3, 6, 4});
  Tensor g = randn({2, 3, 6, 4});
  Tensor qh = q.to(DType::bf16), kh = k.to(DType::bf16), vh = v.to(DType::bf16);
  Tensor gh = g.to(DType::bf16);
  Tensor lse = lse_op(qh, kh, true, 0.5);
  EXPECT_EQ(lse.dtype(), DType::f32);
  EXPECT_TRUE(allclose(lse, lse_op(qh.to(DType::f32), kh.to(DType::f32), true, 0.5), 0, 0));
  Tensor delta = sum(
      gh.to(DType::f32) * scaled_dot_product_attention(qh, kh, vh, true, 0.5).to(DType::f32), {-1});
  for (AttentionWrt wrt : kEveryWrt) {
    Tensor got = grad_op({qh, kh, vh, gh, lse, delta}, true, 0.5, wrt);
    EXPECT_EQ(got.dtype(), DType::f32);
    Tensor want = grad_op(
        {qh.to(DType::f32), kh.to(DType::f32), vh.to(DType::f32), gh.to(DType::f32), lse, delta},
        true, 0.5, wrt);
    EXPECT_TRUE(allclose(got, want, 0, 0)) << ops::attention_wrt_name(wrt);
  }
  // One lse row per head broadcast over a batch of 2: the same as lse expanded.
  Tensor l1 = lse.slice(0, 0, 1), d1 = delta.slice(0, 0, 1);
  for (AttentionWrt wrt : kEveryWrt) {
    Tensor got = grad_op({q, k, v, g, l1, d1}, true, 0.5, wrt);
    Tensor want =
        grad_op({q, k, v, g, l1.expand(lse.shape()), d1.expand(delta.shape())}, true, 0.5, wrt);
    EXPECT_TRUE(allclose(got, want, 0, 0)) << ops::attention_wrt_name(wrt);
    EXPECT_TRUE(allclose(
        decomposed(OpId::attention_grad, {q, k, v, g, l1, d1}, AttentionGradAttrs{true, 0.5, wrt}),
        want, 1e-5, 1e-5))
        << ops::attention_wrt_name(wrt);
  }
}

// No key: lse is -inf and dq zero; no query: dk and dv are zero.
TEST(AttentionGrad, EmptyLengths) {
  Tensor q = randn({2, 3, 4}), none = zeros({2, 0, 4}), v = randn({2, 3, 5});
  for (bool causal : {false, true}) {
    Tensor lse = lse_op(q, none, causal, 0.5);
    ASSERT_EQ(lse.shape(), (Shape{2, 3}));
    EXPECT_TRUE(allclose(lse, full({2, 3}, -std::numeric_limits<double>::infinity())));
    EXPECT_TRUE(
        allclose(decomposed(OpId::attention_lse, {q, none}, AttentionAttrs{causal, 0.5}), lse));
    Tensor g = randn({2, 3, 5}), zero = zeros({2, 3});
    Tensor dq = grad_op({q, none, zeros({2, 0, 5}), g, lse, zero}, causal, 0.5, AttentionWrt::q);
    EXPECT_TRUE(allclose(dq, zeros({2, 3, 4}), 0, 0));
    Tensor kv = grad_op({none, q, v, zeros({2, 0, 5}), zeros({2, 0}), zeros({2, 0})}, causal, 0.5,
                        AttentionWrt::kv);
    EXPECT_TRUE(allclose(kv, zeros({2, 3, 9}), 0, 0));
    EXPECT_TRUE(allclose(decomposed(OpId::attention_grad,
                                    {none, q, v, zeros({2, 0, 5}), zeros({2, 0}), zeros({2, 0})},
                                    AttentionGradAttrs{causal, 0.5, AttentionWrt::kv}),
                         kv, 0, 0));
  }
}

TEST(AttentionGrad, ShapeErrorsNameTheOpAndWhatWasExpected) {
  Tensor q = randn({2, 5, 4}), v = randn({2, 5, 3}), g = randn({2, 5, 3}), l = randn({2, 5});
  std::string msg = test::error_message([&] { lse_op(q, randn({2, 5, 3}), false, 1.0); });
  EXPECT_TRUE(test::contains(msg, "attention_lse")) << msg;
  EXPECT_TRUE(test::contains(msg, "last dim")) << msg;
  msg = test::error_message([&] { lse_op(randn({4}), q, false, 1.0); });
  EXPECT_TRUE(test::contains(msg, "attention_lse")) << msg;
  EXPECT_TRUE(test::contains(msg, "[..., T, dim]")) << msg;
  // g with the wrong length; lse with the wrong length; v and k of different lengths.
  for (const std::vector<Tensor>& in : {std::vector<Tensor>{q, q, v, randn({2, 4, 3}), l, l},
                                        std::vector<Tensor>{q, q, v, g, randn({2, 4}), l},
                                        std::vector<Tensor>{q, q, randn({2, 6, 3}), g, l, l}}) {
    msg = test::error_message([&] { grad_op(in, false, 1.0, AttentionWrt::q); });
    EXPECT_TRUE(test::contains(msg, "attention_grad")) << msg;
    EXPECT_TRUE(test::contains(msg, "g [..., Tq, dv]")) << msg;
  }
  msg = test::error_message([&] {
    grad_op({q, q, v, g, l, randn({3, 5})}, false, 1.0, AttentionWrt::q);
  });
  EXPECT_TRUE(test::contains(msg, "attention_grad")) << msg;
  EXPECT_TRUE(test::contains(msg, "cannot broadcast")) << msg;
}

TEST(AttentionGrad, AttributesPrintAndRoundTrip) {
  const AttentionGradAttrs a{true, 0.125, AttentionWrt::kv};
  EXPECT_EQ(ops::attrs_str(a), "causal=true, scale=0.125, wrt=kv");
  EXPECT_NE(ops::attrs_str(a), ops::attrs_str(AttentionGradAttrs{true, 0.125, AttentionWrt::k}));
  for (AttentionWrt wrt : kEveryWrt) {
    ByteWriter w;
    ops::write_attrs(w, AttentionGradAttrs{false, 0.5, wrt});
    std::vector<uint8_t> bytes = w.take();
    ByteReader r(bytes, "test");
    EXPECT_TRUE(ops::read_attrs(r) == ops::Attrs(AttentionGradAttrs{false, 0.5, wrt}));
  }
  ByteWriter w;
  ops::write_attrs(w, a);
  std::vector<uint8_t> bytes = w.take();
  bytes.back() = 9;  // no such operand
  ByteReader r(bytes, "test");
  std::string msg = test::error_message([&] { ops::read_attrs(r); });
  EXPECT_TRUE(test::contains(msg, "attention gradient operand")) << msg;
}

// Neither op has a derivative: a gradient through one raises the registry's error naming it,
// eagerly and when a backward graph is derived.
TEST(AttentionGrad, NoSecondDerivative) {
  Tensor q = randn({1, 3, 4}).requires_grad_(), k = randn({1, 3, 4});
  Tensor lse = lse_op(q, k, true, 0.5);
  std::string msg = test::error_message([&] { sum(lse).backward(); });
  EXPECT_TRUE(test::contains(msg, "'attention_lse'")) << msg;
  EXPECT_TRUE(test::contains(msg, "no derivative")) << msg;

  Tensor v = randn({1, 3, 4}), g = randn({1, 3, 4}), l = lse.detach(), d = randn({1, 3});
  Tensor dq = grad_op({q, k, v, g, l, d}, true, 0.5, AttentionWrt::q);
  msg = test::error_message([&] { sum(dq).backward(); });
  EXPECT_TRUE(test::contains(msg, "'attention_grad'")) << msg;
  EXPECT_TRUE(test::contains(msg, "no derivative")) << msg;

  // The same in a graph whose gradient is derived (a compiled backward).
  ir::Graph graph;
  auto value = [&](Shape s) {
    return graph.add_value(ops::TensorMeta{std::move(s), DType::f32, Device::cpu()});
  };
  std::vector<ir::ValueId> in{value({1, 3, 4}), value({1, 3, 4}), value({1, 3, 4}),
                              value({1, 3, 4}), value({1, 3}),    value({1, 3})};
  for (ir::ValueId x : in) graph.inputs.push_back({x, ir::InputKind::user});
  ir::ValueId out = graph.add_value(ops::TensorMeta{{1, 3, 4}, DType::f32, Device::cpu()}, 0);
  graph.nodes.push_back(
      ir::Node{OpId::attention_grad, AttentionGradAttrs{true, 0.5, AttentionWrt::q}, in, {out}});
  graph.outputs = {out};
  std::vector<size_t> wrt{0};
  msg = test::error_message([&] { lower::joint_graph(graph, wrt); });
  EXPECT_TRUE(test::contains(msg, "'attention_grad'")) << msg;
}

// The derivative of attention through the new ops gives each input's gradient in its own shape
// and dtype, wanted alone or together (k and v together take the kv op).
TEST(AttentionGrad, TheDerivativeTakesOnlyWhatIsWanted) {
  manual_seed(73);
  for (int mask = 1; mask < 8; ++mask) {
    Tensor q = randn({2, 1, 5, 4}), k = randn({3, 7, 4}), v = randn({7, 2});
    Tensor leaves[] = {q, k, v};
    for (int i = 0; i < 3; ++i) {
      if (mask & (1 << i)) leaves[i].requires_grad_();
    }
    Tensor o = scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], true, 0.6);
    Tensor g = randn(o.shape());
    sum(o * g).backward();
    const Grads want = reference(q, k, v, g, true, 0.6);
    const Tensor* wants[] = {&want.dq, &want.dk, &want.dv};
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE("mask " + std::to_string(mask) + " input " + std::to_string(i));
      if (!(mask & (1 << i))) {
        EXPECT_FALSE(leaves[i].grad().defined());
        continue;
      }
      ASSERT_TRUE(leaves[i].grad().defined());
      EXPECT_EQ(leaves[i].grad().shape(), leaves[i].shape());
      EXPECT_TRUE(allclose(leaves[i].grad().to(DType::f64), *wants[i], 1e-4, 1e-5));
    }
  }
}

}  // namespace
}  // namespace zc
