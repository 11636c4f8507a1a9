// User errors: each bad call raises zc::Error (never another exception type, never a crash)
// whose message names the op, the offending shapes or dtypes, and what was expected.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "zc/cuda.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace {

using zc::DType;
using zc::Tensor;

// Runs fn, which must raise zc::Error with every one of `parts` in its message.
::testing::AssertionResult raises(const std::function<void()>& fn,
                                  const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const zc::Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << p << "\": " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-zc exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

TEST(OpsErrors, MatmulInnerDims) {
  Tensor a = zc::zeros({2, 3}), b = zc::zeros({4, 5});
  EXPECT_TRUE(raises([&] { zc::matmul(a, b); }, {"matmul", "[2,3]", "[4,5]", "3 and 4"}));
  EXPECT_TRUE(
      raises([&] { zc::matmul(zc::zeros({3}), zc::zeros({4})); }, {"matmul", "[3]", "[4]"}));
  EXPECT_TRUE(raises(
      [&] {
        zc::matmul(zc::zeros({2, 2, 3}), zc::zeros({3, 2, 4}));
      },
      {"matmul", "[2,2,3]", "[3,2,4]"}));  // batch dims 2 and 3 do not broadcast
  EXPECT_TRUE(raises([&] { zc::matmul(zc::scalar_tensor(1), a); }, {"matmul"}));
  EXPECT_TRUE(raises(
      [&] {
        zc::linear(zc::zeros({2, 3}), zc::zeros({5, 4}));
      },
      {"linear", "[2,3]", "[5,4]"}));
  EXPECT_TRUE(raises(
      [&] {
        zc::linear(zc::zeros({2, 3}), zc::zeros({5, 3}), zc::zeros({4}));
      },
      {"linear", "[4]"}));
}

TEST(OpsErrors, BroadcastMismatch) {
  Tensor a = zc::zeros({2, 3}), b = zc::zeros({4});
  EXPECT_TRUE(raises([&] { zc::add(a, b); }, {"add", "[2,3]", "[4]", "broadcast"}));
  EXPECT_TRUE(raises([&] { (void)(a * b); }, {"mul", "broadcast"}));
  EXPECT_TRUE(raises([&] { zc::lt(a, b); }, {"lt", "broadcast"}));
  EXPECT_TRUE(raises(
      [&] {
        zc::where(zc::zeros({2, 3}, DType::boolean), a, b);
      },
      {"where", "broadcast"}));
  EXPECT_TRUE(raises([&] { zc::zeros({3, 2}).expand({3, 4}); }, {"expand", "[3,2]", "[3,4]"}));
}

TEST(OpsErrors, ReshapeAndViews) {
  Tensor x = zc::zeros({2, 3});
  EXPECT_TRUE(raises([&] { x.reshape({4, 2}); }, {"reshape", "[2,3]", "[4,2]"}));
  EXPECT_TRUE(raises([&] { x.reshape({-1, 4}); }, {"reshape", "[2,3]"}));
  EXPECT_TRUE(raises([&] { x.reshape({-1, -1}); }, {"reshape"}));
  EXPECT_TRUE(raises([&] { x.view({5}); }, {"view"}));
  EXPECT_TRUE(raises([&] { x.t().view({6}); }, {"view", "reshape"}));  // the fix: use reshape
  EXPECT_TRUE(raises([&] { zc::zeros({2, 3, 4}).permute({0, 1, 1}); }, {"permute", "[0,1,1]"}));
  EXPECT_TRUE(raises([&] { zc::zeros({2, 3, 4}).permute({0, 1}); }, {"permute"}));
  EXPECT_TRUE(raises([&] { zc::zeros({2, 3, 4}).permute({0, 1, 3}); }, {"permute"}));
  EXPECT_TRUE(raises([&] { x.transpose(0, 2); }, {"transpose", "2"}));
  EXPECT_TRUE(raises([&] { x.narrow(1, 2, 2); }, {"narrow"}));
  EXPECT_TRUE(raises([&] { x.select(0, 2); }, {"select", "2"}));
  EXPECT_TRUE(raises([&] { x.slice(0, 0, 2, 0); }, {"slice", "step"}));
  EXPECT_TRUE(raises([&] { x.unsqueeze(4); }, {"unsqueeze"}));
  EXPECT_TRUE(raises([&] { x.squeeze(2); }, {"squeeze"}));
  EXPECT_TRUE(raises([&] { x.size(2); }, {"2"}));
  EXPECT_TRUE(raises([&] { x.flatten(2); }, {"flatten"}));
}

// A dim error names the op and the dim, and says what was allowed: the shape, the rank or the
// valid range.
::testing::AssertionResult bad_dim(const std::function<void()>& fn, const std::string& op,
                                   const std::string& dim) {
  for (const char* context : {"[2,3]", "2 dims", "-2"}) {
    if (raises(fn, {op, dim, context})) return ::testing::AssertionSuccess();
  }
  return raises(fn, {op, dim, "[2,3]"});
}

TEST(OpsErrors, DimOutOfRange) {
  Tensor x = zc::zeros({2, 3});
  EXPECT_TRUE(bad_dim([&] { zc::softmax(x, 2); }, "softmax", "2"));
  EXPECT_TRUE(bad_dim([&] { zc::softmax(x, -3); }, "softmax", "-3"));
  EXPECT_TRUE(bad_dim([&] { zc::log_softmax(x, 5); }, "log_softmax", "5"));
  EXPECT_TRUE(bad_dim([&] { zc::sum(x, {2}); }, "sum", "2"));
  EXPECT_TRUE(raises([&] { zc::sum(x, {0, 0}); }, {"sum"}));  // a dim named twice
  EXPECT_TRUE(bad_dim([&] { zc::mean(x, {-3}); }, "mean", "-3"));
  EXPECT_TRUE(bad_dim([&] { zc::amax(x, {7}); }, "amax", "7"));
  EXPECT_TRUE(bad_dim([&] { zc::argmax(x, 2); }, "argmax", "2"));
  EXPECT_TRUE(bad_dim([&] { zc::var(x, {3}); }, "var", "3"));
  EXPECT_TRUE(raises([&] { zc::max(x, 2); }, {"2"}));
  EXPECT_TRUE(bad_dim([&] { zc::cat({x, x}, 2); }, "cat", "2"));
  EXPECT_TRUE(raises([&] { zc::stack({x, x}, 4); }, {"stack", "4"}));
  EXPECT_TRUE(raises([&] { zc::split(x, 1, 2); }, {"split", "2"}));
}

TEST(OpsErrors, CatAndStack) {
  EXPECT_TRUE(raises(
      [&] {
        zc::cat({zc::zeros({2, 3}), zc::zeros({2, 4})}, 0);
      },
      {"cat", "[2,3]", "[2,4]"}));
  EXPECT_TRUE(raises([&] { zc::cat({zc::zeros({2, 3}), zc::zeros({2, 3, 1})}, 0); }, {"cat"}));
  EXPECT_TRUE(raises([&] { zc::cat({}, 0); }, {"cat"}));
  EXPECT_TRUE(raises(
      [&] {
        zc::stack({zc::zeros({2, 3}), zc::zeros({3, 2})});
      },
      {"stack", "[2,3]", "[3,2]"}));
  EXPECT_TRUE(raises([&] { zc::split(zc::zeros({4}), 0); }, {"split"}));
}

TEST(OpsErrors, Embedding) {
  Tensor w = zc::zeros({10, 4});
  EXPECT_TRUE(raises(
      [&] {
        zc::embedding(w, zc::from_values<int64_t>({1, 10}, {2}));
      },
      {"embedding", "10"}));
  EXPECT_TRUE(
      raises([&] { zc::embedding(w, zc::from_values<int64_t>({-1}, {1})); }, {"embedding", "-1"}));
  EXPECT_TRUE(raises([&] { zc::embedding(w, zc::from_vector({1.f}, {1})); }, {"embedding", "f32"}));
  EXPECT_TRUE(raises([&] { zc::embedding(zc::zeros({10}), zc::zeros({2}, DType::i64)); },
                     {"embedding", "[10]"}));
}

TEST(OpsErrors, LayerNorm) {
  Tensor x = zc::zeros({2, 3, 4});
  EXPECT_TRUE(raises([&] { zc::layer_norm(x, {3}); }, {"layer_norm", "[2,3,4]", "[3]"}));
  EXPECT_TRUE(raises([&] { zc::layer_norm(x, {4}, zc::ones({5})); }, {"layer_norm", "[5]"}));
  EXPECT_TRUE(
      raises([&] { zc::layer_norm(x, {4}, zc::ones({4}), zc::ones({3})); }, {"layer_norm", "[3]"}));
  EXPECT_TRUE(raises([&] { zc::layer_norm(x, {2, 3, 4, 5}); }, {"layer_norm"}));
}

TEST(OpsErrors, DTypes) {
  Tensor x = zc::zeros({2, 3});
  EXPECT_TRUE(raises([&] { zc::where(x, x, x); }, {"where", "bool", "f32"}));
  EXPECT_TRUE(raises([&] { zc::where(zc::zeros({2, 3}, DType::i64), x, x); }, {"where", "i64"}));
  // Ops that only make sense on floats either compute in a floating type or refuse integers
  // with a message naming the dtype; they never return an integer result.
  auto float_or_refused = [](const std::function<Tensor()>& fn, const std::string& op,
                             const std::string& dtype) -> ::testing::AssertionResult {
    try {
      Tensor r = fn();
      if (!zc::is_floating(r.dtype()))
        return ::testing::AssertionFailure() << op << " returned " << zc::dtype_name(r.dtype());
      return ::testing::AssertionSuccess();
    } catch (const zc::Error&) {
      return raises([&] { fn(); }, {op, dtype});
    }
  };
  EXPECT_TRUE(float_or_refused([] { return zc::softmax(zc::zeros({3}, DType::i64), 0); }, "softmax",
                               "i64"));
  EXPECT_TRUE(float_or_refused(
      [] {
        return zc::layer_norm(zc::zeros({2, 3}, DType::i32), {3});
      },
      "layer_norm", "i32"));
  EXPECT_TRUE(float_or_refused(
      [] {
        return zc::mean(zc::zeros({2, 3}, DType::i32));
      },
      "mean", "i32"));
  EXPECT_TRUE(raises([&] { zc::randn({2}, DType::i64); }, {"randn", "i64"}));
}

TEST(OpsErrors, Attention) {
  Tensor q = zc::zeros({2, 5, 4});
  EXPECT_TRUE(raises(
      [&] {
        zc::scaled_dot_product_attention(q, zc::zeros({2, 5, 3}), q);
      },
      {"attention", "[2,5,4]", "[2,5,3]"}));
  EXPECT_TRUE(raises(
      [&] {
        zc::scaled_dot_product_attention(q, q, zc::zeros({2, 6, 4}));
      },
      {"attention", "[2,6,4]"}));
  EXPECT_TRUE(raises(
      [&] { zc::scaled_dot_product_attention(zc::zeros({4}), zc::zeros({4}), zc::zeros({4})); },
      {"attention"}));
}

TEST(OpsErrors, ItemDataAndFactories) {
  EXPECT_TRUE(raises([&] { zc::zeros({2, 3}).item<float>(); }, {"item", "6", "[2,3]"}));
  EXPECT_TRUE(raises([&] { zc::zeros({2}).data<double>(); }, {"f32", "f64"}));
  EXPECT_TRUE(raises([&] { zc::from_vector({1, 2, 3}, {2, 2}); }, {"3", "[2,2]"}));
  EXPECT_TRUE(raises([&] { zc::zeros({2, -1}); }, {"[2,-1]"}));
  EXPECT_TRUE(raises([&] { zc::randint(5, 5, {2}); }, {"randint"}));
  EXPECT_TRUE(raises([&] { zc::arange(0.0, 1.0, 0.0); }, {"arange", "step"}));
  EXPECT_TRUE(raises([&] { zc::dropout(zc::zeros({2}), 1.5); }, {"dropout", "1.5"}));
  EXPECT_TRUE(raises([&] { zc::dropout(zc::zeros({2}), -0.1); }, {"dropout"}));
  if (!zc::cuda::is_available()) {
    EXPECT_TRUE(raises([&] { zc::zeros({2}).to(zc::Device::cuda(0)); }, {"cuda"}));
  }
}

TEST(OpsErrors, UndefinedTensor) {
  Tensor u, x = zc::zeros({2});
  EXPECT_TRUE(raises([&] { zc::add(u, x); }, {"add", "undefined"}));
  EXPECT_TRUE(raises([&] { zc::add(x, u); }, {"add", "undefined"}));
  EXPECT_TRUE(raises([&] { zc::relu(u); }, {"relu", "undefined"}));
  EXPECT_TRUE(raises([&] { zc::sum(u); }, {"sum", "undefined"}));
  EXPECT_TRUE(raises([&] { zc::matmul(u, x); }, {"matmul", "undefined"}));
  EXPECT_TRUE(raises([&] { zc::cat({x, u}); }, {"cat", "undefined"}));
  EXPECT_TRUE(raises([&] { (void)u.shape(); }, {"undefined"}));
  EXPECT_TRUE(raises([&] { u.reshape({2}); }, {"undefined"}));
  EXPECT_TRUE(raises([&] { u.item<float>(); }, {"undefined"}));
  EXPECT_TRUE(raises([&] { (void)(u + 1.0); }, {"undefined"}));
  EXPECT_FALSE(u.defined());
}

}  // namespace
