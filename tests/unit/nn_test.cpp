#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/epoch.h"
#include "ops/dispatch.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace {

using zc::test::contains;
using zc::test::error_message;

std::vector<std::string> names_of(const std::vector<std::pair<std::string, zc::Tensor>>& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}

// Overwrites a freshly created (contiguous f32) parameter with random values, so that tests
// do not pass by accident on ones and zeros.
void fill_random(const zc::Tensor& t) {
  zc::Tensor r = zc::randn(t.shape());
  const float* src = r.data<float>();
  float* dst = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = src[i];
}

void fill_zero(const zc::Tensor& t) {
  float* dst = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = 0.0f;
}

struct Inner : zc::nn::Module {
  std::shared_ptr<zc::nn::Linear> fc;
  Inner() { fc = register_module("fc", std::make_shared<zc::nn::Linear>(2, 3)); }
  zc::Tensor forward(const zc::Tensor& x) override { return (*fc)(x); }
};

struct Outer : zc::nn::Module {
  std::shared_ptr<Inner> first;
  zc::Tensor scale;
  std::shared_ptr<zc::nn::Linear> second;
  Outer() {
    first = register_module("first", std::make_shared<Inner>());
    scale = register_parameter("scale", zc::ones({3}));
    register_buffer("steps", zc::zeros({1}, zc::DType::i64));
    second = register_module("second", std::make_shared<zc::nn::Linear>(3, 1, false));
  }
  zc::Tensor forward(const zc::Tensor& x) override { return (*second)((*first)(x)*scale); }
};

TEST(NnModule, NamedParametersAreDottedDepthFirstInRegistrationOrder) {
  Outer m;
  // A module's own tensors come before its children's, as in torch.
  EXPECT_EQ(
      names_of(m.named_parameters()),
      (std::vector<std::string>{"scale", "first.fc.weight", "first.fc.bias", "second.weight"}));
  EXPECT_EQ(names_of(m.named_buffers()), (std::vector<std::string>{"steps"}));
  ASSERT_EQ(m.parameters().size(), 4u);
  EXPECT_EQ(m.parameters()[1].unsafe_impl(), m.first->fc->weight.unsafe_impl());
  auto children = m.named_children();
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(children[0].first, "first");
  EXPECT_EQ(children[1].first, "second");
}

TEST(NnModule, SeedModelNames) {
  auto model = zc::models::seed_model(2, 4);
  EXPECT_EQ(names_of(model->named_parameters()),
            (std::vector<std::string>{
                "linear.weight", "linear.bias", "layers.0.linear1.weight", "layers.0.linear1.bias",
                "layers.0.linear2.weight", "layers.0.linear2.bias", "layers.1.linear1.weight",
                "layers.1.linear1.bias", "layers.1.linear2.weight", "layers.1.linear2.bias"}));
}

TEST(NnModule, ParameterCounts) {
  zc::nn::Linear with_bias(3, 4), without_bias(3, 4, false);
  EXPECT_EQ(with_bias.parameters().size(), 2u);
  EXPECT_EQ(without_bias.parameters().size(), 1u);
  EXPECT_FALSE(without_bias.bias.defined());
  int64_t n = 0;
  for (const auto& p : with_bias.parameters()) n += p.numel();
  EXPECT_EQ(n, 3 * 4 + 4);
  zc::nn::LayerNorm no_affine(5, 1e-5, false);
  EXPECT_TRUE(no_affine.parameters().empty());
}

TEST(NnModule, FindTensorFollowsDottedPaths) {
  Outer m;
  zc::Tensor* w = m.find_tensor("first.fc.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->unsafe_impl(), m.first->fc->weight.unsafe_impl());
  ASSERT_NE(m.find_tensor("steps"), nullptr);
  EXPECT_EQ(m.find_tensor("first.fc.nope"), nullptr);
  EXPECT_EQ(m.find_tensor("third.weight"), nullptr);
  EXPECT_EQ(m.find_tensor(""), nullptr);
}

TEST(NnModule, BadNamesThrow) {
  Outer m;
  EXPECT_TRUE(
      contains(error_message([&] { m.register_parameter("scale", zc::ones({1})); }), "'scale'"));
  EXPECT_TRUE(
      contains(error_message([&] { m.register_buffer("first", zc::ones({1})); }), "already used"));
  EXPECT_TRUE(contains(
      error_message([&] { m.register_module("second", std::make_shared<zc::nn::ReLU>()); }),
      "'second'"));
  EXPECT_TRUE(contains(error_message([&] { m.register_parameter("a.b", zc::ones({1})); }), "'.'"));
  EXPECT_TRUE(contains(error_message([&] { m.register_parameter("", zc::ones({1})); }), "empty"));
  EXPECT_TRUE(
      contains(error_message([&] { m.register_parameter("u", zc::Tensor()); }), "undefined"));
  EXPECT_TRUE(contains(
      error_message([&] { m.register_module("n", std::shared_ptr<zc::nn::Module>()); }), "null"));
}

TEST(NnModule, TrainEvalPropagates) {
  auto model = zc::models::seed_model(2, 4);
  EXPECT_TRUE(model->is_training());
  model->eval();
  EXPECT_FALSE(model->is_training());
  EXPECT_FALSE((*model->layers)[1]->is_training());
  EXPECT_FALSE(std::dynamic_pointer_cast<zc::models::SeedLayer>((*model->layers)[0])
                   ->linear2->is_training());
  model->train();
  EXPECT_TRUE((*model->layers)[0]->is_training());
  EXPECT_TRUE(model->linear->is_training());
}

TEST(NnModule, TypeNameIsDemangled) {
  zc::nn::Linear lin(2, 2);
  EXPECT_EQ(lin.type_name(), "zc::nn::Linear");
  zc::nn::Module& base = lin;
  EXPECT_EQ(base.type_name(), "zc::nn::Linear");
  EXPECT_TRUE(contains(Outer().type_name(), "Outer"));
  EXPECT_EQ(zc::models::SeedLayer(2).type_name(), "zc::models::SeedLayer");
}

TEST(NnModule, BaseForwardThrows) {
  zc::nn::Module m;
  const std::string msg = error_message([&] { m(zc::ones({2})); });
  EXPECT_TRUE(contains(msg, "zc::nn::Module")) << msg;
  EXPECT_TRUE(contains(msg, "forward() is not implemented")) << msg;
  zc::nn::ModuleList list;
  list.push_back(std::make_shared<zc::nn::ReLU>());
  EXPECT_TRUE(contains(error_message([&] { list(zc::ones({2})); }), "zc::nn::ModuleList"));
}

// Records the region structure that Module::operator() reports to an interceptor.
class RegionRecorder : public zc::ops::OpInterceptor {
 public:
  std::vector<zc::Tensor> intercept(const zc::ops::OpDef&, std::span<const zc::Tensor>,
                                    const zc::ops::Attrs&) override {
    ADD_FAILURE() << "no input is traced, so no op should be intercepted";
    return {};
  }
  void enter_region(std::string_view type_name, const void* module) override {
    events.push_back("enter " + std::string(type_name));
    modules.push_back(module);
  }
  void exit_region() override { events.push_back("exit"); }
  std::vector<std::string> events;
  std::vector<const void*> modules;
};

TEST(NnModule, CallOpensOneRegionPerModuleCall) {
  auto model = zc::models::seed_model(1, 3);
  RegionRecorder recorder;
  {
    zc::ops::InterceptorScope scope(&recorder);
    (*model)(zc::randn({2, 3}));
  }
  EXPECT_EQ(recorder.events,
            (std::vector<std::string>{"enter zc::models::SeedModel", "enter zc::nn::Linear", "exit",
                                      "enter zc::models::SeedLayer", "enter zc::nn::Linear", "exit",
                                      "enter zc::nn::ReLU", "exit", "enter zc::nn::Linear", "exit",
                                      "enter zc::nn::ReLU", "exit", "exit", "exit"}));
  ASSERT_FALSE(recorder.modules.empty());
  EXPECT_EQ(recorder.modules[0], model.get());
  EXPECT_EQ(recorder.modules[1], model->linear.get());
}

struct Renamed : zc::nn::Module {
  std::string type_name() const override { return "MyBlock"; }
  zc::Tensor forward(const zc::Tensor& x) override { return x; }
};

TEST(NnModule, RegionUsesOverriddenTypeName) {
  Renamed m;
  RegionRecorder recorder;
  {
    zc::ops::InterceptorScope scope(&recorder);
    m(zc::ones({1}));
  }
  EXPECT_EQ(recorder.events, (std::vector<std::string>{"enter MyBlock", "exit"}));
}

TEST(NnModule, ToF64KeepsMemberHandlesInSync) {
  zc::manual_seed(3);
  Outer m;
  zc::Tensor before = m.first->fc->weight.clone();
  zc::Tensor handle = m.first->fc->weight;
  m.to(zc::DType::f64);
  EXPECT_EQ(m.first->fc->weight.dtype(), zc::DType::f64);
  EXPECT_EQ(handle.dtype(), zc::DType::f64);
  EXPECT_EQ(m.scale.dtype(), zc::DType::f64);
  for (const auto& [name, p] : m.named_parameters()) EXPECT_EQ(p.dtype(), zc::DType::f64) << name;
  EXPECT_EQ(m.named_parameters()[1].second.unsafe_impl(), m.first->fc->weight.unsafe_impl());
  // Integer buffers keep their dtype, as in torch.
  EXPECT_EQ(m.named_buffers()[0].second.dtype(), zc::DType::i64);
  EXPECT_TRUE(zc::allclose(handle, before.to(zc::DType::f64), 0, 0));
  zc::Tensor y = m(zc::randn({4, 2}, zc::DType::f64));
  EXPECT_EQ(y.dtype(), zc::DType::f64);
  EXPECT_EQ(y.shape(), (zc::Shape{4, 1}));

  EXPECT_TRUE(contains(error_message([&] { m.to(zc::DType::i32); }), "floating-point"));
}

TEST(NnModule, ToCudaThrowsAndChangesNothing) {
  if (zc::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present (CudaRuntimeGpu)";
  zc::nn::Linear lin(2, 2);
  const std::string msg = error_message([&] { lin.to(zc::Device::cuda()); });
  EXPECT_TRUE(contains(msg, "CUDA")) << msg;
  EXPECT_TRUE(lin.weight.device().is_cpu());
  lin.to(zc::Device::cpu());  // a no-op, but allowed
  EXPECT_TRUE(lin.weight.device().is_cpu());
}

// Compiled modules skip re-checking their guards while the epoch stands still, so every change
// a guard could see must move it.
TEST(NnModule, EpochMovesOnEveryStructureChange) {
  Outer m;
  auto moved = [&](auto&& change) {
    const uint64_t before = zc::nn::module_epoch();
    change();
    return zc::nn::module_epoch() != before;
  };
  EXPECT_TRUE(moved([&] { m.register_parameter("extra", zc::ones({1})); }));
  EXPECT_TRUE(moved([&] { m.register_buffer("extra_buffer", zc::ones({1})); }));
  EXPECT_TRUE(moved([&] { m.register_module("relu", std::make_shared<zc::nn::ReLU>()); }));
  EXPECT_TRUE(moved([&] { m.eval(); }));
  EXPECT_TRUE(moved([&] { m.train(); }));
  EXPECT_TRUE(moved([&] { m.to(zc::DType::f64); }));
  EXPECT_FALSE(moved([&] { m(zc::randn({2, 2}, zc::DType::f64)); }));
}

TEST(NnLinear, MatchesManualMatmul) {
  zc::manual_seed(1);
  zc::nn::Linear lin(3, 5);
  const double bound = 1.0 / std::sqrt(3.0);
  EXPECT_LE(zc::max(zc::abs(lin.weight)).item<double>(), bound);
  EXPECT_LE(zc::max(zc::abs(lin.bias)).item<double>(), bound);
  zc::Tensor x = zc::randn({4, 3});
  EXPECT_TRUE(zc::allclose(lin(x), zc::matmul(x, lin.weight.t()) + lin.bias, 1e-5, 1e-6));
  zc::Tensor x3 = zc::randn({2, 4, 3});
  zc::Tensor y3 = lin(x3);
  EXPECT_EQ(y3.shape(), (zc::Shape{2, 4, 5}));
  EXPECT_TRUE(zc::allclose(y3, zc::matmul(x3, lin.weight.t()) + lin.bias, 1e-5, 1e-6));
  zc::nn::Linear no_bias(3, 5, false);
  EXPECT_TRUE(zc::allclose(no_bias(x), zc::matmul(x, no_bias.weight.t()), 1e-5, 1e-6));
}

// Init::none allocates the weights a loader fills and draws nothing: the random stream is
// where it was.
TEST(NnLinear, InitNoneDrawsNothing) {
  zc::manual_seed(7);
  const zc::Tensor expected = zc::randn({4});
  zc::manual_seed(7);
  zc::nn::Linear lin(3, 5, true, zc::nn::Init::none);
  zc::nn::Embedding emb(10, 3, zc::nn::Init::none);
  EXPECT_TRUE(zc::allclose(zc::randn({4}), expected, 0, 0));
  EXPECT_EQ(lin.weight.shape(), (zc::Shape{5, 3}));
  EXPECT_EQ(lin.bias.shape(), (zc::Shape{5}));
  EXPECT_EQ(emb.weight.shape(), (zc::Shape{10, 3}));
  EXPECT_EQ(lin.named_parameters().size(), 2u);
  // The default still draws.
  zc::manual_seed(7);
  zc::nn::Linear drawn(3, 5);
  EXPECT_FALSE(zc::allclose(zc::randn({4}), expected, 0, 0));
}

TEST(NnLinear, BadSizesThrow) {
  const std::string msg = error_message([] { zc::nn::Linear(0, 3); });
  EXPECT_TRUE(contains(msg, "zc::nn::Linear")) << msg;
  EXPECT_TRUE(contains(msg, "in_features")) << msg;
  EXPECT_TRUE(contains(error_message([] { zc::nn::Linear(3, -2); }), "-2"));
}

TEST(NnLayerNorm, MatchesManualComputation) {
  zc::manual_seed(2);
  zc::nn::LayerNorm ln(6);
  EXPECT_EQ(ln.weight.shape(), (zc::Shape{6}));
  EXPECT_TRUE(zc::allclose(ln.weight, zc::ones({6}), 0, 0));
  EXPECT_TRUE(zc::allclose(ln.bias, zc::zeros({6}), 0, 0));
  fill_random(ln.weight);
  fill_random(ln.bias);
  zc::Tensor x = zc::randn({3, 4, 6}) * 3.0 + 1.0;
  zc::Tensor mu = zc::mean(x, {-1}, true);
  zc::Tensor var = zc::mean((x - mu) * (x - mu), {-1}, true);  // biased, as layer_norm uses
  zc::Tensor expected = (x - mu) / zc::sqrt(var + 1e-5) * ln.weight + ln.bias;
  EXPECT_TRUE(zc::allclose(ln(x), expected, 1e-4, 1e-5));

  EXPECT_TRUE(contains(error_message([] { zc::nn::LayerNorm(0); }), "zc::nn::LayerNorm"));
  EXPECT_TRUE(contains(error_message([] { zc::nn::LayerNorm(4, -1.0); }), "eps"));
}

TEST(NnEmbedding, GathersRows) {
  zc::nn::Embedding emb(5, 3);
  zc::Tensor idx = zc::from_values<int64_t>({4, 0, 4, 2}, {2, 2});
  zc::Tensor out = emb(idx);
  ASSERT_EQ(out.shape(), (zc::Shape{2, 2, 3}));
  EXPECT_TRUE(zc::allclose(out.select(0, 0).select(0, 0), emb.weight.select(0, 4), 0, 0));
  EXPECT_TRUE(zc::allclose(out.select(0, 1).select(0, 1), emb.weight.select(0, 2), 0, 0));
  EXPECT_TRUE(contains(error_message([] { zc::nn::Embedding(3, 0); }), "embedding_dim"));
}

TEST(NnDropout, IdentityInEvalAndForZeroP) {
  zc::nn::Dropout drop(0.5);
  drop.eval();
  zc::Tensor x = zc::randn({8, 8});
  EXPECT_TRUE(zc::allclose(drop(x), x, 0, 0));
  zc::nn::Dropout none(0.0);
  EXPECT_TRUE(none.is_training());
  EXPECT_TRUE(zc::allclose(none(x), x, 0, 0));
}

TEST(NnDropout, TrainingZeroesAFractionPAndRescales) {
  zc::manual_seed(5);
  zc::nn::Dropout drop(0.3);
  const int64_t n = 200000;
  zc::Tensor y = drop(zc::ones({n}));
  const double zeros = zc::sum(zc::eq(y, zc::zeros({1}))).item<double>();
  // Binomial(n, 0.3) has a standard deviation of about 205; 0.005 * n is ~5 of them.
  EXPECT_NEAR(zeros / n, 0.3, 0.005);
  const double kept_value = 1.0 / 0.7;
  const double kept = zc::sum(zc::lt(zc::abs(y - kept_value), zc::full({1}, 1e-5))).item<double>();
  EXPECT_EQ(kept + zeros, static_cast<double>(n));
}

TEST(NnDropout, BadProbabilityThrows) {
  EXPECT_TRUE(contains(error_message([] { zc::nn::Dropout(1.0); }), "zc::nn::Dropout"));
  EXPECT_TRUE(contains(error_message([] { zc::nn::Dropout(-0.1); }), "-0.1"));
}

TEST(NnSequential, ChainsAndNamesByIndex) {
  auto lin1 = std::make_shared<zc::nn::Linear>(3, 4);
  auto lin2 = std::make_shared<zc::nn::Linear>(4, 2);
  zc::nn::Sequential seq{lin1, std::make_shared<zc::nn::ReLU>(), lin2};
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(names_of(seq.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  zc::Tensor x = zc::randn({5, 3});
  EXPECT_TRUE(zc::allclose(seq(x), (*lin2)(zc::relu((*lin1)(x))), 1e-6, 1e-7));
  EXPECT_EQ(seq[2], lin2);
  EXPECT_TRUE(contains(error_message([&] { seq[3]; }), "out of range"));
  zc::nn::Sequential empty;
  EXPECT_TRUE(zc::allclose(empty(x), x, 0, 0));
}

TEST(NnModuleList, IndexesAndRegisters) {
  zc::nn::ModuleList list;
  list.push_back(std::make_shared<zc::nn::Linear>(2, 2));
  list.push_back(std::make_shared<zc::nn::Linear>(2, 2, false));
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(names_of(list.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight"}));
  int count = 0;
  for (const auto& m : list) count += m != nullptr;
  EXPECT_EQ(count, 2);
  EXPECT_TRUE(contains(error_message([&] { list[2]; }), "out of range"));
}

// softmax(q k^T / sqrt(hd)) v per head, built from slices, matmul and softmax only.
zc::Tensor manual_attention(zc::nn::MultiheadAttention& mha, const zc::Tensor& x, bool causal) {
  const int64_t d = mha.d_model, h = mha.num_heads, hd = d / h, t = x.size(1);
  zc::Tensor qkv = zc::matmul(x, mha.in_proj->weight.t()) + mha.in_proj->bias;
  std::vector<float> mask_values(t * t, 0.0f);
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = i + 1; j < t; ++j) mask_values[i * t + j] = -1e30f;
  }
  zc::Tensor mask = zc::from_vector(mask_values, {t, t});
  std::vector<zc::Tensor> outs;
  for (int64_t head = 0; head < h; ++head) {
    zc::Tensor q = qkv.narrow(2, head * hd, hd);
    zc::Tensor k = qkv.narrow(2, d + head * hd, hd);
    zc::Tensor v = qkv.narrow(2, 2 * d + head * hd, hd);
    zc::Tensor scores = zc::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(hd));
    if (causal) scores = scores + mask;
    outs.push_back(zc::matmul(zc::softmax(scores, -1), v));
  }
  zc::Tensor y = zc::cat(outs, 2);
  return zc::matmul(y, mha.out_proj->weight.t()) + mha.out_proj->bias;
}

TEST(NnAttention, MatchesManualComputation) {
  for (bool causal : {false, true}) {
    zc::manual_seed(7);
    zc::nn::MultiheadAttention mha(8, 2, causal);
    EXPECT_EQ(names_of(mha.named_parameters()),
              (std::vector<std::string>{"in_proj.weight", "in_proj.bias", "out_proj.weight",
                                        "out_proj.bias"}));
    zc::Tensor x = zc::randn({2, 5, 8});
    zc::Tensor y = mha(x);
    ASSERT_EQ(y.shape(), (zc::Shape{2, 5, 8}));
    EXPECT_TRUE(zc::allclose(y, manual_attention(mha, x, causal), 1e-4, 1e-5))
        << "causal=" << causal;
  }
}

// Changing the last token's input changes every output of a non-causal layer, but no earlier
// output of a causal one.
TEST(NnAttention, CausalOutputsIgnoreLaterTokens) {
  zc::manual_seed(8);
  zc::Tensor x = zc::randn({1, 6, 8});
  zc::Tensor x2 = zc::cat({x.narrow(1, 0, 5), zc::randn({1, 1, 8})}, 1);
  for (bool causal : {true, false}) {
    zc::nn::MultiheadAttention mha(8, 4, causal);
    zc::Tensor early = mha(x).narrow(1, 0, 5);
    zc::Tensor early2 = mha(x2).narrow(1, 0, 5);
    EXPECT_EQ(zc::allclose(early, early2, 1e-6, 1e-7), causal) << "causal=" << causal;
  }
}

TEST(NnAttention, BadArgsThrow) {
  const std::string msg = error_message([] { zc::nn::MultiheadAttention(10, 3); });
  EXPECT_TRUE(contains(msg, "10")) << msg;
  EXPECT_TRUE(contains(msg, "num_heads 3")) << msg;
  zc::nn::MultiheadAttention mha(8, 2);
  EXPECT_TRUE(contains(error_message([&] { mha(zc::randn({5, 8})); }), "[5,8]"));
  EXPECT_TRUE(contains(error_message([&] { mha(zc::randn({1, 5, 6})); }), "[B, T, 8]"));
}

TEST(NnTransformerBlock, ShapeNamesAndResidual) {
  zc::manual_seed(9);
  zc::nn::TransformerBlock block(8, 2);
  EXPECT_EQ(names_of(block.named_parameters()),
            (std::vector<std::string>{"ln1.weight", "ln1.bias", "attn.in_proj.weight",
                                      "attn.in_proj.bias", "attn.out_proj.weight",
                                      "attn.out_proj.bias", "ln2.weight", "ln2.bias", "fc.weight",
                                      "fc.bias", "proj.weight", "proj.bias"}));
  EXPECT_EQ(block.fc->weight.shape(), (zc::Shape{32, 8}));
  zc::Tensor x = zc::randn({2, 3, 8});
  zc::Tensor y = block(x);
  EXPECT_EQ(y.shape(), x.shape());

  // Reference: the pre-LN formula written out with the block's own submodules.
  zc::Tensor h = x + (*block.attn)((*block.ln1)(x));
  zc::Tensor expected =
      h + (*block.proj)(zc::gelu((*block.fc)((*block.ln2)(h)), zc::GeluApprox::tanh));
  EXPECT_TRUE(zc::allclose(y, expected, 1e-5, 1e-6));

  // With both branches' output projections zeroed, the block is the identity.
  fill_zero(block.attn->out_proj->weight);
  fill_zero(block.attn->out_proj->bias);
  fill_zero(block.proj->weight);
  fill_zero(block.proj->bias);
  EXPECT_TRUE(zc::allclose(block(x), x, 0, 0));
}

}  // namespace
