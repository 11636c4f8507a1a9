#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "unit/test_support.h"
#include "zc/zc.h"

namespace {

using zc::test::contains;
using zc::test::error_message;

zc::models::GPTConfig small_config() {
  zc::models::GPTConfig c;
  c.vocab_size = 100;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 32;
  return c;
}

// Init::none (what from_pretrained builds a GPT-2 with): the same parameters, no number drawn.
TEST(ModelsGPT, InitNoneDrawsNothing) {
  zc::manual_seed(9);
  const zc::Tensor expected = zc::randn({4});
  zc::manual_seed(9);
  auto bare = zc::models::gpt(small_config(), zc::nn::Init::none);
  EXPECT_TRUE(zc::allclose(zc::randn({4}), expected, 0, 0));
  auto drawn = zc::models::gpt(small_config());
  const auto a = bare->named_parameters(), b = drawn->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.shape(), b[i].second.shape()) << a[i].first;
  }
  zc::manual_seed(9);
  zc::models::gpt(small_config());
  EXPECT_FALSE(zc::allclose(zc::randn({4}), expected, 0, 0));
}

TEST(ModelsGPT, ParameterNamesAndCount) {
  auto model = zc::models::gpt(small_config());
  const auto named = model->named_parameters();
  // wte, wpe, 12 per block, ln_f weight and bias.
  ASSERT_EQ(named.size(), 2u + 2u * 12u + 2u);
  EXPECT_EQ(named[0].first, "wte.weight");
  EXPECT_EQ(named[1].first, "wpe.weight");
  EXPECT_EQ(named[2].first, "blocks.0.ln1.weight");
  EXPECT_EQ(named[4].first, "blocks.0.attn.in_proj.weight");
  EXPECT_EQ(named[14].first, "blocks.1.ln1.weight");
  EXPECT_EQ(named[25].first, "blocks.1.proj.bias");
  EXPECT_EQ(named[26].first, "ln_f.weight");
  EXPECT_EQ(named[27].first, "ln_f.bias");

  int64_t count = 0;
  for (const auto& [name, p] : named) count += p.numel();
  const int64_t d = 32;
  const int64_t embeddings = 100 * d + 16 * d;             // 3712
  const int64_t layer_norm = 2 * d;                        // 64
  const int64_t attention = (d * 3 * d + 3 * d)            // in_proj: 3168
                            + (d * d + d);                 // out_proj: 1056
  const int64_t mlp = (d * 4 * d + 4 * d)                  // fc: 4224
                      + (4 * d * d + d);                   // proj: 4128
  const int64_t block = 2 * layer_norm + attention + mlp;  // 12704
  EXPECT_EQ(count, embeddings + 2 * block + layer_norm);
  EXPECT_EQ(count, 29184);
}

TEST(ModelsGPT, OutputShapeIsBatchTimeVocab) {
  zc::manual_seed(0);
  auto model = zc::models::gpt(small_config());
  zc::Tensor tokens = zc::randint(0, 100, {2, 7});
  zc::Tensor logits = (*model)(tokens);
  EXPECT_EQ(logits.shape(), (zc::Shape{2, 7, 100}));
  EXPECT_EQ(logits.dtype(), zc::DType::f32);
  // i32 token ids are accepted as well.
  EXPECT_EQ((*model)(tokens.to(zc::DType::i32)).shape(), (zc::Shape{2, 7, 100}));
  // The full context length is allowed.
  EXPECT_EQ((*model)(zc::randint(0, 100, {1, 16})).shape(), (zc::Shape{1, 16, 100}));
}

TEST(ModelsGPT, EarlierLogitsIgnoreLaterTokens) {
  zc::manual_seed(1);
  auto model = zc::models::gpt(small_config());
  zc::Tensor a = zc::from_values<int64_t>({5, 17, 42, 8, 99, 3}, {1, 6});
  zc::Tensor b = zc::from_values<int64_t>({5, 17, 42, 8, 99, 61}, {1, 6});
  zc::Tensor la = (*model)(a), lb = (*model)(b);
  EXPECT_TRUE(zc::allclose(la.narrow(1, 0, 5), lb.narrow(1, 0, 5), 1e-5, 1e-5));
  EXPECT_FALSE(zc::allclose(la.narrow(1, 5, 1), lb.narrow(1, 5, 1), 1e-5, 1e-5));
}

TEST(ModelsGPT, DeterministicUnderManualSeed) {
  auto run = [] {
    zc::manual_seed(42);
    auto model = zc::models::gpt(small_config());
    zc::Tensor tokens = zc::randint(0, 100, {2, 5});
    return std::make_pair(model, (*model)(tokens));
  };
  auto [m1, y1] = run();
  auto [m2, y2] = run();
  EXPECT_TRUE(zc::allclose(y1, y2, 0, 0));
  const auto p1 = m1->named_parameters(), p2 = m2->named_parameters();
  ASSERT_EQ(p1.size(), p2.size());
  for (size_t i = 0; i < p1.size(); ++i) {
    EXPECT_TRUE(zc::allclose(p1[i].second, p2[i].second, 0, 0)) << p1[i].first;
  }
  zc::manual_seed(43);
  EXPECT_FALSE(zc::allclose(zc::models::gpt(small_config())->wte->weight, m1->wte->weight));
}

TEST(ModelsGPT, HeadIsTiedToTokenEmbedding) {
  zc::manual_seed(2);
  auto model = zc::models::gpt(small_config());
  zc::Tensor tokens = zc::randint(0, 100, {1, 4});
  zc::Tensor x = (*model->wte)(tokens) + (*model->wpe)(zc::arange(4));
  for (const auto& block : *model->blocks) x = (*block)(x);
  zc::Tensor expected = zc::matmul((*model->ln_f)(x), model->wte->weight.t());
  EXPECT_TRUE(zc::allclose((*model)(tokens), expected, 1e-5, 1e-5));
}

TEST(ModelsGPT, BadInputsThrow) {
  auto model = zc::models::gpt(small_config());
  std::string msg = error_message([&] { (*model)(zc::randn({2, 3})); });
  EXPECT_TRUE(contains(msg, "zc::models::GPT")) << msg;
  EXPECT_TRUE(contains(msg, "f32")) << msg;
  msg = error_message([&] { (*model)(zc::randint(0, 100, {6})); });
  EXPECT_TRUE(contains(msg, "[6]")) << msg;
  msg = error_message([&] { (*model)(zc::randint(0, 100, {1, 17})); });
  EXPECT_TRUE(contains(msg, "17")) << msg;
  EXPECT_TRUE(contains(msg, "block_size 16")) << msg;
}

TEST(ModelsGPT, BadConfigThrows) {
  auto c = small_config();
  c.n_head = 3;
  std::string msg = error_message([&] { zc::models::gpt(c); });
  EXPECT_TRUE(contains(msg, "n_head 3")) << msg;
  c = small_config();
  c.vocab_size = 0;
  msg = error_message([&] { zc::models::gpt(c); });
  EXPECT_TRUE(contains(msg, "vocab_size")) << msg;
}

// GPT-2 checkpoints set both: every LayerNorm takes the epsilon, the MLP the width.
TEST(ModelsGPT, LayerNormEpsilonAndMlpRatio) {
  auto c = small_config();
  c.layer_norm_eps = 0.25;
  c.mlp_ratio = 2;
  auto model = zc::models::gpt(c);
  EXPECT_EQ(model->ln_f->eps, 0.25);
  for (const auto& m : *model->blocks) {
    auto block = std::dynamic_pointer_cast<zc::nn::TransformerBlock>(m);
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(block->ln1->eps, 0.25);
    EXPECT_EQ(block->ln2->eps, 0.25);
    EXPECT_EQ(block->fc->out_features, 2 * 32);
  }
  c.layer_norm_eps = -1;
  EXPECT_TRUE(contains(error_message([&] { zc::models::gpt(c); }), "layer_norm_eps"));
  c = small_config();
  c.mlp_ratio = 0;
  EXPECT_TRUE(contains(error_message([&] { zc::models::gpt(c); }), "mlp_ratio"));
}

TEST(ModelsSeed, StructureAndForward) {
  zc::manual_seed(0);
  auto model = zc::models::seed_model(3, 4);
  EXPECT_EQ(model->layers->size(), 3u);
  EXPECT_EQ(model->named_parameters().size(), 2u + 3u * 4u);
  EXPECT_EQ(model->linear->weight.shape(), (zc::Shape{4, 4}));

  zc::Tensor x = zc::randn({5, 4});
  zc::Tensor expected = zc::linear(x, model->linear->weight, model->linear->bias);
  for (const auto& m : *model->layers) {
    auto layer = std::dynamic_pointer_cast<zc::models::SeedLayer>(m);
    ASSERT_NE(layer, nullptr);
    zc::Tensor a =
        zc::sigmoid(zc::relu(zc::linear(expected, layer->linear1->weight, layer->linear1->bias)));
    expected = zc::relu(zc::linear(a, layer->linear2->weight, layer->linear2->bias));
  }
  zc::Tensor y = (*model)(x);
  EXPECT_EQ(y.shape(), (zc::Shape{5, 4}));
  EXPECT_TRUE(zc::allclose(y, expected, 1e-6, 1e-7));

  // Default: the recipe's 64 layers of width 10.
  auto recipe = zc::models::seed_model();
  EXPECT_EQ(recipe->layers->size(), 64u);
  EXPECT_EQ(recipe->linear->in_features, 10);
  EXPECT_TRUE(contains(error_message([] { zc::models::seed_model(-1); }), "n_layers"));
}

}  // namespace
