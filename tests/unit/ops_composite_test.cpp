// Composite ops against the float64 reference: softmax, log_softmax, layer_norm, linear, matmul
// in every numpy form, embedding, cat, stack, split, attention and dropout.
//
// Tolerances: each output is a short chain of float ops over a line of n elements (a max, a sum
// of exps, a mean and a variance, a dot product), so we allow 4 * eps * (2 + sqrt(n)) relative to
// the output's natural scale; for matmul that scale is (|a| @ |b|), the error bound of a dot
// product. Gathers and concatenations move bits and must be exact.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include "unit/attention_cases.h"

#include "unit/reference.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace {

using zc::DType;
using zc::Shape;
using zc::Tensor;
using zc::ref::Arr;
using zc::ref::Layout;
using zc::ref::Tol;

using zc::ref::name_of;

Tol line_tol(DType dt, int64_t n, double scale = 1) {
  const double t = 4 * zc::ref::unit_roundoff(dt) * (2 + std::sqrt(static_cast<double>(n)));
  return {t, t * scale};
}

::testing::AssertionResult close_matmul(const Tensor& got, const Arr& a, const Arr& b, DType dt) {
  const int64_t K = a.shape.back();
  Arr scale = zc::ref::abs_matmul(a, b);
  const double rel = 4 * zc::ref::unit_roundoff(dt) * (2 + std::sqrt(static_cast<double>(K)));
  return zc::ref::close(got, zc::ref::matmul(a, b), dt, {zc::ref::unit_roundoff(dt), 1e-30}, &scale,
                        rel);
}

TEST(OpsComposite, SoftmaxAndLogSoftmaxEveryDim) {
  std::mt19937 rng(21);
  zc::manual_seed(21);
  for (int trial = 0; trial < 3; ++trial) {
    Shape shape = zc::ref::random_shape(rng, 1, 4, 7);
    Arr x = zc::ref::uniform(shape, -3, 3);
    for (DType dt : zc::ref::float_dtypes()) {
      for (auto& [lname, xt] : zc::ref::inputs(x, dt)) {
        Arr xin = zc::ref::read(xt);
        for (int64_t d = -x.dim(); d < x.dim(); ++d) {
          SCOPED_TRACE(name_of(dt) + " " + zc::ref::show(shape) + " dim=" + std::to_string(d) +
                       " " + lname);
          const int64_t n = shape[d < 0 ? d + x.dim() : d];
          EXPECT_TRUE(
              zc::ref::close(zc::softmax(xt, d), zc::ref::softmax(xin, d), dt, line_tol(dt, n)));
          // Log-probabilities of inputs within [-3, 3] are at most ~8 in magnitude.
          EXPECT_TRUE(zc::ref::close(zc::log_softmax(xt, d), zc::ref::log_softmax(xin, d), dt,
                                     line_tol(dt, n, 8)));
        }
      }
    }
  }
}

TEST(OpsComposite, SoftmaxIsStableAndLarge) {
  // Large logits overflow a naive exp; -inf entries are masked positions.
  Arr x{{2, 3}, {1000, 1000, -1000, -INFINITY, 0, 1}};
  Tensor xt = zc::ref::make(x, DType::f32);
  EXPECT_TRUE(zc::ref::close(zc::softmax(xt, 1), zc::ref::softmax(x, 1), DType::f32));
  EXPECT_TRUE(
      zc::ref::close(zc::log_softmax(xt, 1), zc::ref::log_softmax(x, 1), DType::f32, {1e-6, 1e-5}));
  zc::manual_seed(22);
  Arr big = zc::ref::uniform({2, 100000}, -5, 5);
  Tensor bt = zc::ref::make(big, DType::f32);
  EXPECT_TRUE(zc::ref::close(zc::softmax(bt, 1), zc::ref::softmax(big, 1), DType::f32,
                             line_tol(DType::f32, 100000, 1e-5)));
  EXPECT_TRUE(zc::ref::close(zc::log_softmax(bt, -1), zc::ref::log_softmax(big, -1), DType::f32,
                             line_tol(DType::f32, 100000, 20)));
  // A long non-innermost softmax dim.
  Arr tall = zc::ref::uniform({50000, 2}, -5, 5);
  EXPECT_TRUE(zc::ref::close(zc::softmax(zc::ref::make(tall, DType::f32), 0),
                             zc::ref::softmax(tall, 0), DType::f32,
                             line_tol(DType::f32, 50000, 1e-5)));
}

TEST(OpsComposite, LayerNorm) {
  std::mt19937 rng(23);
  zc::manual_seed(23);
  for (int64_t nd : {1, 2}) {
    for (int mask = 0; mask < 4; ++mask) {  // with/without weight x with/without bias
      const bool has_w = mask & 1, has_b = mask & 2;
      for (DType dt : zc::ref::float_dtypes()) {
        Shape shape = zc::ref::random_shape(rng, nd, 4, 6);
        shape.back() += 1;  // at least two elements per normalized group
        Shape norm(shape.end() - nd, shape.end());
        Arr x = zc::ref::map(zc::ref::uniform(shape, -2, 2), [](double v) { return 3 + v; });
        Arr w = zc::ref::uniform(norm, 0.5, 1.5), b = zc::ref::uniform(norm, -1, 1);
        Tensor xt = zc::ref::make(x, dt, Layout::strided);
        Tensor wt = zc::ref::make(w, dt, Layout::column_major), bt = zc::ref::make(b, dt);
        Arr xin = zc::ref::read(xt), win = zc::ref::read(wt), bin = zc::ref::read(bt);
        const double eps = mask == 3 ? 1e-3 : 1e-5;
        SCOPED_TRACE(name_of(dt) + " " + zc::ref::show(shape) + " weight=" + std::to_string(has_w) +
                     " bias=" + std::to_string(has_b) + " eps=" + std::to_string(eps));
        Tensor y = zc::layer_norm(xt, norm, has_w ? wt : Tensor(), has_b ? bt : Tensor(), eps);
        Arr want =
            zc::ref::layer_norm(xin, nd, has_w ? &win : nullptr, has_b ? &bin : nullptr, eps);
        // Outputs are O(3); the mean of 3 + U(-2, 2) is subtracted, so float error scales with 3.
        EXPECT_TRUE(zc::ref::close(y, want, dt, line_tol(dt, zc::ref::numel_of(norm), 8)));
      }
    }
  }
  // A constant row normalizes to zero (variance 0, eps keeps it finite).
  Tensor c = zc::layer_norm(zc::full({2, 4}, 7.0), {4});
  EXPECT_TRUE(zc::ref::close(c, zc::ref::constant({2, 4}, 0), DType::f32, {0, 1e-5}));
}

TEST(OpsComposite, Linear) {
  zc::manual_seed(24);
  for (Shape xs : {Shape{5, 7}, Shape{2, 3, 7}, Shape{7}}) {
    for (bool bias : {true, false}) {
      for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
        SCOPED_TRACE(zc::ref::show(xs) + " bias=" + std::to_string(bias) + " " + name_of(dt));
        Arr x = zc::ref::uniform(xs, -1, 1), w = zc::ref::uniform({4, 7}, -1, 1);
        Arr b = zc::ref::uniform({4}, -1, 1);
        Tensor xt = zc::ref::make(x, dt, Layout::strided);
        // The weight as the transpose of a packed [in, out] tensor, as after loading a
        // checkpoint stored the other way round.
        Tensor wt = zc::ref::make(zc::ref::transpose_last2(w), dt).t();
        Tensor bt = zc::ref::make(b, dt);
        Arr xin = zc::ref::read(xt), win = zc::ref::read(wt), bin = zc::ref::read(bt);
        Arr want = zc::ref::matmul(xin, zc::ref::transpose_last2(win));
        if (bias) want = zc::ref::zip(want, bin, std::plus<double>());
        Tensor y = zc::linear(xt, wt, bias ? bt : Tensor());
        Tol tol = line_tol(dt, 7, 3);  // |x| |w| sums to at most 7; typical outputs are O(1)
        EXPECT_TRUE(zc::ref::close(y, want, dt, tol));
      }
    }
  }
}

TEST(OpsComposite, MatmulEveryForm) {
  zc::manual_seed(25);
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases{
      {{5}, {5}},                 // dot: 0-dim
      {{4}, {4, 3}},              // vector @ matrix
      {{3, 4}, {4}},              // matrix @ vector
      {{3, 4}, {4, 5}},           // plain
      {{1, 1}, {1, 1}},           //
      {{2, 3, 4}, {2, 4, 5}},     // batched
      {{2, 3, 4}, {4, 5}},        // batch against a matrix
      {{4}, {2, 4, 3}},           // vector against a batch
      {{2, 3, 4}, {4}},           //
      {{2, 1, 3, 4}, {5, 4, 6}},  // broadcasting batch dims: [2,5,3,6]
      {{1, 3, 2}, {4, 2, 3}},     //
  };
  for (const auto& c : cases) {
    for (DType dt : zc::ref::float_dtypes()) {
      for (int form = 0; form < 2; ++form) {
        SCOPED_TRACE(zc::ref::show(c.a) + " @ " + zc::ref::show(c.b) + " " + name_of(dt) +
                     (form ? " column_major" : " packed"));
        Arr a = zc::ref::uniform(c.a, -1, 1), b = zc::ref::uniform(c.b, -1, 1);
        Layout l = form ? Layout::column_major : Layout::contiguous;
        Tensor at = zc::ref::make(a, dt, l), bt = zc::ref::make(b, dt, form ? Layout::strided : l);
        EXPECT_TRUE(close_matmul(zc::matmul(at, bt), zc::ref::read(at), zc::ref::read(bt), dt));
      }
    }
  }
}

TEST(OpsComposite, MatmulLargeAndTransposedViews) {
  zc::manual_seed(26);
  // Big enough for a BLAS or blocked path, odd sizes for edge tiles.
  Arr a = zc::ref::uniform({67, 129}, -1, 1), b = zc::ref::uniform({129, 95}, -1, 1);
  Tensor at = zc::ref::make(a, DType::f32), bt = zc::ref::make(b, DType::f32);
  a = zc::ref::read(at);  // the values f32 holds
  b = zc::ref::read(bt);
  EXPECT_TRUE(close_matmul(zc::matmul(at, bt), a, b, DType::f32));
  // a^T @ b^T through the library's own transpose views.
  Tensor atT = zc::ref::make(zc::ref::transpose_last2(a), DType::f32).t();
  Tensor btT = zc::ref::make(zc::ref::transpose_last2(b), DType::f32).t();
  EXPECT_TRUE(close_matmul(zc::matmul(atT, btT), a, b, DType::f32));
  EXPECT_TRUE(close_matmul(zc::matmul(atT, bt), a, b, DType::f32));
  // A batched matmul whose batch is an expanded (stride 0) view.
  Arr m = zc::ref::uniform({1, 16, 32}, -1, 1), n = zc::ref::uniform({3, 32, 8}, -1, 1);
  Tensor me = zc::ref::make(m, DType::f32).expand({3, 16, 32});
  Arr mexp = zc::ref::read(me);
  EXPECT_TRUE(close_matmul(zc::matmul(me, zc::ref::make(n, DType::f32)), mexp, n, DType::f32));
  // Integers: exact.
  Arr ia = zc::ref::small_ints({3, 4}, -5, 5), ib = zc::ref::small_ints({4, 2}, -5, 5);
  try {
    Tensor r = zc::matmul(zc::ref::make(ia, DType::i64), zc::ref::make(ib, DType::i64));
    EXPECT_TRUE(zc::ref::close(r, zc::ref::matmul(ia, ib), DType::i64));
  } catch (const zc::Error&) {
    // Integer matmul is optional; refusing it with a zc::Error is fine.
  }
}

TEST(OpsComposite, Embedding) {
  zc::manual_seed(27);
  Arr w = zc::ref::uniform({10, 4}, -1, 1);
  Arr idx{{2, 3}, {0, 9, 3, 3, 1, 0}};  // repeated and boundary indices
  for (DType it : {DType::i64, DType::i32}) {
    for (DType wt : {DType::f32, DType::f64, DType::f16}) {
      SCOPED_TRACE(name_of(it) + " " + name_of(wt));
      Tensor wten = zc::ref::make(w, wt, Layout::column_major);
      Arr win = zc::ref::read(wten);
      Tensor iten = zc::ref::make(idx, it, Layout::strided);
      EXPECT_TRUE(
          zc::ref::close(zc::embedding(wten, iten), zc::ref::embedding(win, idx), wt, {0, 0}));
      Arr one{{}, {7}};
      EXPECT_TRUE(zc::ref::close(zc::embedding(wten, zc::ref::make(one, it)),
                                 zc::ref::embedding(win, one), wt, {0, 0}));
    }
  }
  Arr flat{{5}, {4, 4, 2, 8, 0}};
  EXPECT_TRUE(
      zc::ref::close(zc::embedding(zc::ref::make(w, DType::f32), zc::ref::make(flat, DType::i64)),
                     zc::ref::embedding(w, flat), DType::f32, {1e-7, 0}));
}

TEST(OpsComposite, Cat) {
  zc::manual_seed(28);
  for (DType dt : {DType::f32, DType::f16, DType::i64, DType::boolean}) {
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE(name_of(dt) + " dim=" + std::to_string(dim));
      std::vector<Arr> xs;
      std::vector<Tensor> ts;
      for (int64_t k : {1, 3, 2}) {
        Shape s{2, 3, 4};
        s[dim < 0 ? dim + 3 : dim] = k;
        Arr a = zc::ref::small_ints(s, dt == DType::boolean ? 0 : -9, dt == DType::boolean ? 1 : 9);
        ts.push_back(zc::ref::make(a, dt, k == 3 ? Layout::column_major : Layout::strided));
        xs.push_back(a);
      }
      EXPECT_TRUE(zc::ref::close(zc::cat(ts, dim), zc::ref::cat(xs, dim), dt, {0, 0}));
    }
  }
  Tensor one = zc::from_vector({1, 2, 3}, {3});
  EXPECT_TRUE(zc::ref::close(zc::cat({one}, 0), Arr{{3}, {1, 2, 3}}, DType::f32, {0, 0}));
  // A zero-size piece contributes nothing.
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::cat({one, zc::zeros({0})}); }, {3}));
  // Large: past any parallel copy threshold.
  Arr big = zc::ref::uniform({2, 60000}, -1, 1), small = zc::ref::uniform({2, 3}, -1, 1);
  EXPECT_TRUE(
      zc::ref::close(zc::cat({zc::ref::make(big, DType::f32), zc::ref::make(small, DType::f32)}, 1),
                     zc::ref::cat({big, small}, 1), DType::f32, {1e-7, 0}));
}

TEST(OpsComposite, Stack) {
  zc::manual_seed(29);
  Arr a = zc::ref::uniform({2, 3}, -1, 1), b = zc::ref::uniform({2, 3}, -1, 1);
  Tensor at = zc::ref::make(a, DType::f64), bt = zc::ref::make(b, DType::f64, Layout::column_major);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    SCOPED_TRACE("dim=" + std::to_string(dim));
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Arr ua = a, ub = b;  // stack is cat of the inputs unsqueezed at dim
    ua.shape.insert(ua.shape.begin() + d, 1);
    ub.shape.insert(ub.shape.begin() + d, 1);
    EXPECT_TRUE(
        zc::ref::close(zc::stack({at, bt}, dim), zc::ref::cat({ua, ub}, d), DType::f64, {0, 0}));
  }
  EXPECT_EQ(zc::stack({zc::scalar_tensor(1), zc::scalar_tensor(2)}).shape(), (Shape{2}));
}

TEST(OpsComposite, SplitIntoViews) {
  Arr x{{7, 2}, {}};
  for (int i = 0; i < 14; ++i) x.v.push_back(i);
  Tensor xt = zc::ref::make(x, DType::f32);
  auto parts = zc::split(xt, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));  // the last chunk is smaller
  EXPECT_EQ(zc::ref::read(parts[1]).v, (std::vector<double>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(zc::ref::read(parts[2]).v, (std::vector<double>{12, 13}));
  xt.data<float>()[7] = -1;  // the chunks are views
  EXPECT_EQ(zc::ref::read(parts[1]).v[1], -1);

  auto cols = zc::split(xt, 1, -1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(cols[1].shape(), (Shape{7, 1}));
  EXPECT_EQ(zc::ref::read(cols[1]).v, (std::vector<double>{1, 3, 5, -1, 9, 11, 13}));
  auto whole = zc::split(xt, 10);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].shape(), (Shape{7, 2}));
  auto even = zc::split(xt, 7, 0);
  EXPECT_EQ(even.size(), 1u);
}

TEST(OpsComposite, ScaledDotProductAttention) {
  zc::manual_seed(30);
  const std::vector<zc::test::AttentionCase> cases{
      {{2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, false, std::nullopt},
      {{2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, true, std::nullopt},
      {{2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, true, 0.3},
      {{2, 6, 8}, {2, 6, 8}, {2, 6, 3}, true, std::nullopt},   // 3-D, value dim differs
      {{1, 2, 4, 8}, {1, 2, 7, 8}, {1, 2, 7, 5}, false, 1.7},  // more keys than queries
      {{1, 1, 8}, {1, 1, 8}, {1, 1, 8}, true, std::nullopt},   // one token
  };
  for (const auto& c : cases) {
    for (DType dt : zc::ref::float_dtypes()) {
      SCOPED_TRACE(zc::ref::show(c.q) + zc::ref::show(c.k) + zc::ref::show(c.v) +
                   " causal=" + std::to_string(c.causal) + " " + name_of(dt));
      Arr q = zc::ref::uniform(c.q, -1, 1), k = zc::ref::uniform(c.k, -1, 1);
      Arr v = zc::ref::uniform(c.v, -1, 1);
      Tensor qt = zc::ref::make(q, dt, Layout::strided),
             kt = zc::ref::make(k, dt, Layout::column_major);
      Tensor vt = zc::ref::make(v, dt);
      Arr want = zc::ref::attention(zc::ref::read(qt), zc::ref::read(kt), zc::ref::read(vt),
                                    c.causal, c.scale);
      Tensor y = zc::scaled_dot_product_attention(qt, kt, vt, c.causal, c.scale);
      EXPECT_TRUE(zc::ref::close(y, want, dt, line_tol(dt, c.k[c.k.size() - 2] + c.q.back())));
    }
  }
  // The causal mask in isolation: with all-equal logits, query t averages values 0..t.
  Arr v{{1, 4, 1}, {1, 2, 3, 4}};
  Tensor z = zc::zeros({1, 4, 2});
  Tensor y = zc::scaled_dot_product_attention(z, z, zc::ref::make(v, DType::f32), true);
  EXPECT_TRUE(zc::ref::close(y, Arr{{1, 4, 1}, {1, 1.5, 2, 2.5}}, DType::f32));
}

TEST(OpsComposite, Dropout) {
  zc::manual_seed(31);
  Arr x = zc::ref::uniform({100, 1000}, 0.5, 1.5);
  Tensor xt = zc::ref::make(x, DType::f32);
  EXPECT_TRUE(zc::ref::close(zc::dropout(xt, 0.0), zc::ref::read(xt), DType::f32, {0, 0}));

  const double p = 0.3;
  Tensor y = zc::dropout(xt, p);
  ASSERT_EQ(y.shape(), xt.shape());
  ASSERT_EQ(zc::dtype_name(y.dtype()), "f32");
  Arr yv = zc::ref::read(y);
  int64_t zeros = 0;
  double sum_x = 0, sum_y = 0;
  for (int64_t i = 0; i < yv.numel(); ++i) {
    sum_x += x.v[i];
    sum_y += yv.v[i];
    if (yv.v[i] == 0) {
      ++zeros;
    } else {  // survivors are scaled by 1 / (1 - p)
      ASSERT_NEAR(yv.v[i], x.v[i] / (1 - p), 1e-6 * std::fabs(yv.v[i])) << i;
    }
  }
  const double n = static_cast<double>(yv.numel());
  // The zero fraction is Binomial(n, p) / n with sd sqrt(p (1-p) / n) = 0.00145: allow 5 sd.
  EXPECT_NEAR(zeros / n, p, 0.0075);
  // The mean is preserved in expectation; its relative sd is about sqrt(p / ((1-p) n)) = 0.002.
  EXPECT_NEAR(sum_y / sum_x, 1.0, 0.012);
  // The mask comes from the seeded generator.
  zc::manual_seed(99);
  Arr m1 = zc::ref::read(zc::dropout(xt, 0.5));
  zc::manual_seed(99);
  EXPECT_EQ(zc::ref::read(zc::dropout(xt, 0.5)).v, m1.v);
  // Non-contiguous input: the survivors keep their own values.
  Tensor xtt = xt.t();
  Arr xtv = zc::ref::read(xtt), ytv = zc::ref::read(zc::dropout(xtt, 0.5));
  for (int64_t i = 0; i < xtv.numel(); ++i) {
    if (ytv.v[i] != 0) {
      ASSERT_NEAR(ytv.v[i], 2 * xtv.v[i], 1e-6 * ytv.v[i]) << i;
    }
  }
}

TEST(OpsComposite, ZeroSizeDimsWorkOrThrow) {
  Tensor e = zc::zeros({0, 4});
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::softmax(e, 1); }, {0, 4}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::softmax(e, 0); }, {0, 4}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::layer_norm(e, {4}); }, {0, 4}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::matmul(e, zc::ones({4, 3})); }, {0, 3}));
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::linear(e, zc::ones({3, 4})); }, {0, 3}));
  EXPECT_TRUE(zc::ref::works_or_throws(
      [&] {
        return zc::embedding(zc::ones({5, 2}), zc::zeros({0}, DType::i64));
      },
      {0, 2}));
  // K = 0: the sum over nothing is zero.
  try {
    Tensor r = zc::matmul(zc::zeros({2, 0}), zc::zeros({0, 3}));
    EXPECT_TRUE(zc::ref::close(r, zc::ref::constant({2, 3}, 0), DType::f32, {0, 0}));
  } catch (const zc::Error&) {
  }
  EXPECT_TRUE(zc::ref::works_or_throws([&] { return zc::dropout(e, 0.5); }, {0, 4}));
  EXPECT_TRUE(zc::ref::works_or_throws(
      [&] {
        return zc::scaled_dot_product_attention(zc::zeros({1, 0, 4}), zc::zeros({1, 0, 4}),
                                                zc::zeros({1, 0, 4}), true);
      },
      {1, 0, 4}));
}

TEST(OpsComposite, Allclose) {
  Tensor a = zc::from_vector({1, 2, 3}, {3});
  EXPECT_TRUE(zc::allclose(a, zc::from_vector({1, 2, 3.000001f}, {3})));
  EXPECT_FALSE(zc::allclose(a, zc::from_vector({1, 2, 3.1f}, {3})));
  EXPECT_TRUE(zc::allclose(a, zc::from_vector({1, 2, 3.1f}, {3}), 0.1));
  EXPECT_TRUE(zc::allclose(a, zc::from_vector({1.05f, 2, 3}, {3}), 0, 0.06));
  EXPECT_FALSE(zc::allclose(a, zc::from_vector({1.05f, 2, 3}, {3}), 0, 0.04));
  EXPECT_TRUE(zc::allclose(a.reshape({3, 1}).t(), zc::from_vector({1, 2, 3}, {1, 3})));
}

}  // namespace
