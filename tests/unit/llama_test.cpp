// zc::models::Llama built from a LlamaConfig: transformers' parameter names and shapes, the
// config's checks, RMSNorm, RoPE and grouped-query attention against their definitions,
// causality, compiled against eager. Numerics against transformers itself are the
// PretrainedFixture tests'.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "models/rope.h"
#include "runtime/driver/compile_graph.h"
#include "tensor/assign.h"
#include "unit/op_programs.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace {

using zc::Tensor;
using zc::models::LlamaConfig;
using zc::models::RopeScaling;
using zc::test::contains;
using zc::test::error_message;

LlamaConfig small_config() {
  LlamaConfig c;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 16;
  return c;
}

TEST(ModelsLlama, ParameterNamesAndShapesAreTransformers) {
  zc::manual_seed(0);
  auto model = zc::models::llama(small_config());
  const auto named = model->named_parameters();
  // Embedding, 9 per layer (4 projections, 3 MLP, 2 norms), final norm, head.
  ASSERT_EQ(named.size(), 1u + 2u * 9u + 1u + 1u);
  std::map<std::string, zc::Shape> shapes;
  for (const auto& [name, p] : named) shapes[name] = p.shape();
  EXPECT_EQ(named.front().first, "model.embed_tokens.weight");
  EXPECT_EQ(named.back().first, "lm_head.weight");
  const std::map<std::string, zc::Shape> expected = {
      {"model.embed_tokens.weight", {50, 32}},
      {"model.layers.0.self_attn.q_proj.weight", {32, 32}},
      {"model.layers.0.self_attn.k_proj.weight", {16, 32}},  // 2 key-value heads of 8
      {"model.layers.0.self_attn.v_proj.weight", {16, 32}},
      {"model.layers.0.self_attn.o_proj.weight", {32, 32}},
      {"model.layers.1.mlp.gate_proj.weight", {48, 32}},
      {"model.layers.1.mlp.up_proj.weight", {48, 32}},
      {"model.layers.1.mlp.down_proj.weight", {32, 48}},
      {"model.layers.1.input_layernorm.weight", {32}},
      {"model.layers.1.post_attention_layernorm.weight", {32}},
      {"model.norm.weight", {32}},
      {"lm_head.weight", {50, 32}},
  };
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(shapes.count(name)) << name;
    EXPECT_EQ(shapes[name], shape) << name;
  }
  // The rotary tables are buffers, not parameters: a checkpoint has no such tensors.
  const auto buffers = model->named_buffers();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].first, "model.rotary_emb.cos");
  EXPECT_EQ(buffers[0].second.shape(), (zc::Shape{16, 4}));
}

TEST(ModelsLlama, TiedBiasedAndHeadDimVariants) {
  LlamaConfig c = small_config();
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.mlp_bias = true;
  c.head_dim = 12;  // apart from hidden / heads
  c.rms_norm_eps = 0.125;
  auto model = zc::models::llama(c);
  EXPECT_EQ(model->lm_head, nullptr);
  EXPECT_EQ(model->model->norm->eps, 0.125);
  for (const auto& m : *model->model->layers) {
    auto layer = std::dynamic_pointer_cast<zc::models::LlamaDecoderLayer>(m);
    ASSERT_NE(layer, nullptr);
    EXPECT_EQ(layer->input_layernorm->eps, 0.125);
    EXPECT_EQ(layer->post_attention_layernorm->eps, 0.125);
  }
  std::map<std::string, zc::Shape> shapes;
  for (const auto& [name, p] : model->named_parameters()) shapes[name] = p.shape();
  EXPECT_FALSE(shapes.count("lm_head.weight"));
  EXPECT_EQ(shapes["model.layers.0.self_attn.q_proj.weight"], (zc::Shape{48, 32}));
  EXPECT_EQ(shapes["model.layers.0.self_attn.q_proj.bias"], (zc::Shape{48}));
  EXPECT_EQ(shapes["model.layers.0.self_attn.k_proj.bias"], (zc::Shape{24}));
  EXPECT_EQ(shapes["model.layers.0.self_attn.o_proj.weight"], (zc::Shape{32, 48}));
  EXPECT_EQ(shapes["model.layers.0.mlp.down_proj.bias"], (zc::Shape{32}));
  const Tensor logits = (*model)(zc::randint(0, 50, {2, 5}));
  EXPECT_EQ(logits.shape(), (zc::Shape{2, 5, 50}));
}

TEST(ModelsLlama, ConfigResolvesDefaultsAndRefusesInconsistencies) {
  LlamaConfig c = small_config();
  c.num_key_value_heads = 0;
  const LlamaConfig r = c.resolved();
  EXPECT_EQ(r.num_key_value_heads, 4);
  EXPECT_EQ(r.head_dim, 8);

  struct Case {
    std::function<void(LlamaConfig&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](LlamaConfig& x) { x.num_key_value_heads = 3; }, "not a multiple of num_key_value_heads"},
      {[](LlamaConfig& x) { x.hidden_size = 30; }, "not divisible by num_attention_heads"},
      {[](LlamaConfig& x) { x.head_dim = 7; }, "head_dim must be even"},
      {[](LlamaConfig& x) { x.vocab_size = 0; }, "vocab_size must be positive"},
      {[](LlamaConfig& x) { x.rope_theta = -1; }, "rope_theta"},
      {[](LlamaConfig& x) { x.rms_norm_eps = NAN; }, "rms_norm_eps"},
      {[](LlamaConfig& x) { x.num_hidden_layers = -1; }, "num_hidden_layers"},
      {[](LlamaConfig& x) {
         x.rope_scaling.type = RopeScaling::Type::llama3;
         x.rope_scaling.factor = 8;
         x.rope_scaling.low_freq_factor = 4;
         x.rope_scaling.high_freq_factor = 1;
       },
       "low_freq_factor 4.000000 must be below high_freq_factor"},
      {[](LlamaConfig& x) {
         x.rope_scaling.type = RopeScaling::Type::linear;
         x.rope_scaling.factor = 0;
       },
       "rope_scaling.factor"},
  };
  for (const auto& k : cases) {
    LlamaConfig bad = small_config();
    k.change(bad);
    const std::string msg = error_message([&] { zc::models::llama(bad); });
    EXPECT_TRUE(contains(msg, "LlamaConfig")) << msg;
    EXPECT_TRUE(contains(msg, k.expected)) << msg;
  }
}

TEST(ModelsLlama, RopeFrequenciesPerScalingType) {
  LlamaConfig c = small_config();
  c.head_dim = 16;
  c.rope_theta = 500000;
  const auto base = zc::models::rope_inverse_frequencies(c.resolved());
  ASSERT_EQ(base.size(), 8u);
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_FLOAT_EQ(base[i], static_cast<float>(std::pow(500000.0, -2.0 * double(i) / 16)));
  }
  c.rope_scaling = {.type = RopeScaling::Type::linear, .factor = 4};
  const auto linear = zc::models::rope_inverse_frequencies(c.resolved());
  for (size_t i = 0; i < base.size(); ++i) EXPECT_FLOAT_EQ(linear[i], base[i] / 4);
  // Within max_position_embeddings, dynamic NTK scaling leaves the frequencies alone.
  c.rope_scaling = {.type = RopeScaling::Type::dynamic, .factor = 4};
  EXPECT_EQ(zc::models::rope_inverse_frequencies(c.resolved()), base);

  c.rope_scaling = {.type = RopeScaling::Type::llama3,
                    .factor = 8,
                    .low_freq_factor = 1,
                    .high_freq_factor = 4,
                    .original_max_position_embeddings = 64};
  const auto llama3 = zc::models::rope_inverse_frequencies(c.resolved());
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / base[i];
    if (wavelen < 64.0 / 4) {
      EXPECT_FLOAT_EQ(llama3[i], base[i]) << i;
      ++kept;
    } else if (wavelen > 64.0 / 1) {
      EXPECT_FLOAT_EQ(llama3[i], base[i] / 8) << i;
      ++divided;
    } else {
      EXPECT_LT(llama3[i], base[i]) << i;
      EXPECT_GT(llama3[i], base[i] / 8) << i;
      ++blended;
    }
  }
  // The config is chosen to have all three bands.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(ModelsLlama, RmsNormComputesInF32AndScales) {
  zc::models::LlamaRMSNorm norm(4, 1e-6);
  {
    zc::NoGradGuard no_grad;
    zc::assign_values(norm.weight, zc::from_vector({1, 2, 3, 4}, {4}));
  }
  const Tensor x = zc::from_vector({1, -2, 3, 0, 0.5f, 0.5f, 0.5f, 0.5f}, {2, 4});
  const Tensor y = norm(x);
  const double rms0 = std::sqrt((1 + 4 + 9 + 0) / 4.0 + 1e-6);
  const double rms1 = std::sqrt(0.25 + 1e-6);
  const std::vector<double> want = {1 / rms0,       -2 * 2 / rms0,  3 * 3 / rms0,   0,
                                    1 * 0.5 / rms1, 2 * 0.5 / rms1, 3 * 0.5 / rms1, 4 * 0.5 / rms1};
  const float* got = y.data<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  // A bf16 input comes back bf16, normalized as in f32 then rounded once before the weight.
  const Tensor yb = norm(x.to(zc::DType::bf16));
  EXPECT_EQ(yb.dtype(), zc::DType::f32);  // the weight is f32: promotion, as in torch
  EXPECT_TRUE(zc::allclose(yb, y, 1e-2, 1e-2));
}

TEST(ModelsLlama, RotaryIsRotateHalf) {
  zc::manual_seed(3);
  const Tensor x = zc::randn({1, 2, 3, 8});
  const Tensor cos = zc::randn({3, 4}), sin = zc::randn({3, 4});
  const Tensor got = zc::models::apply_rotary(x, cos, sin);
  // transformers: x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), rotate_half(x) being
  // cat(-x[..., 4:], x[..., :4]).
  const Tensor rotated = zc::cat({-x.narrow(-1, 4, 4), x.narrow(-1, 0, 4)}, -1);
  const Tensor want = x * zc::cat({cos, cos}, -1) + rotated * zc::cat({sin, sin}, -1);
  EXPECT_TRUE(zc::allclose(got, want, 1e-6, 1e-6));
  // Position 0's angle is 0: the tables start at cos 1, sin 0, so position 0 is unrotated.
  const auto tables = zc::models::rope_tables({1.0f, 0.5f}, 3);
  EXPECT_EQ(tables.cos.data<float>()[0], 1.0f);
  EXPECT_EQ(tables.sin.data<float>()[1], 0.0f);
  EXPECT_FLOAT_EQ(tables.sin.data<float>()[2 * 2 + 1], static_cast<float>(std::sin(1.0)));
}

// Compiled by the C++ backend, the rotation of a transposed projection (as LlamaAttention
// calls it) is one elementwise kernel (no concatenation) and equals eager.
TEST(ModelsLlama, RotaryCompilesToOneKernel) {
  zc::manual_seed(4);
  const std::vector<Tensor> in{zc::randn({1, 3, 2 * 8}), zc::randn({3, 4}), zc::randn({3, 4})};
  auto rotate = [&](const std::vector<Tensor>& x) {
    return zc::models::apply_rotary(x[0].reshape({1, 3, 2, 8}).transpose(1, 2), x[1], x[2]);
  };
  zc::capture::Captured cap =
      zc::capture::capture_function(in, [&] { return std::vector<Tensor>{rotate(in)}; });
  const auto& cpp = zc::runtime::resolve_backend("cpp", zc::Device::cpu());
  zc::lower::LowerContext lc;
  lc.keep = cpp.native_ops();
  const zc::codegen::CodegenResult code =
      zc::codegen::codegen(zc::lower::lower(cap.graph, lc), cpp);
  // One pass computes it (the graph output, a view of it, is then copied out densely).
  int pointwise = 0;
  for (const zc::codegen::Kernel& k : code.schedule.kernels) {
    pointwise += k.kind == zc::codegen::KernelKind::pointwise;
    EXPECT_TRUE(k.kind == zc::codegen::KernelKind::pointwise ||
                k.kind == zc::codegen::KernelKind::copy)
        << zc::codegen::kernel_kind_name(k.kind);
  }
  EXPECT_EQ(pointwise, 1);
  auto m = std::make_shared<zc::test::MultiFn>(
      [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{rotate(x)}; });
  EXPECT_TRUE(zc::allclose(zc::compile(m)(in)[0], rotate(in), 1e-6, 1e-6));
}

// Grouped-query attention shares key-value head j with query heads j*group..(j+1)*group-1 (as
// transformers' repeat_kv): a model with 2 key-value heads equals one with 4 whose key and
// value projections repeat each of the 2 heads for the 2 query heads of its group.
TEST(ModelsLlama, GroupedQueryAttentionEqualsRepeatedHeads) {
  zc::manual_seed(4);
  LlamaConfig grouped_config = small_config();  // 4 query heads, 2 key-value heads of 8
  LlamaConfig full_config = grouped_config;
  full_config.num_key_value_heads = 4;
  auto grouped = zc::models::llama(grouped_config);
  auto full = zc::models::llama(full_config);
  zc::NoGradGuard no_grad;
  auto full_params = full->named_parameters();
  for (auto& [name, p] : grouped->named_parameters()) {
    Tensor* target = full->find_tensor(name);
    ASSERT_NE(target, nullptr) << name;
    if (contains(name, "k_proj") || contains(name, "v_proj")) {
      // [2 heads * 8, 32] -> [4 heads * 8, 32]: head j becomes heads 2j and 2j+1.
      const Tensor heads = p.reshape({2, 1, 8, 32}).expand({2, 2, 8, 32}).reshape({32, 32});
      zc::assign_values(*target, heads.contiguous());
    } else {
      zc::assign_values(*target, p);
    }
  }
  const Tensor ids = zc::randint(0, 50, {2, 9});
  EXPECT_TRUE(zc::allclose((*grouped)(ids), (*full)(ids), 1e-5, 1e-5));
}

TEST(ModelsLlama, EarlierLogitsIgnoreLaterTokens) {
  zc::manual_seed(5);
  auto model = zc::models::llama(small_config());
  const Tensor a = zc::from_values<int64_t>({5, 17, 42, 8, 33, 3}, {1, 6});
  const Tensor b = zc::from_values<int64_t>({5, 17, 42, 8, 33, 49}, {1, 6});
  const Tensor la = (*model)(a), lb = (*model)(b);
  EXPECT_TRUE(zc::allclose(la.narrow(1, 0, 5), lb.narrow(1, 0, 5), 1e-5, 1e-5));
  EXPECT_FALSE(zc::allclose(la.narrow(1, 5, 1), lb.narrow(1, 5, 1), 1e-5, 1e-5));
}

// Without positions, the last token's attention over the others would not see their order:
// swapping two earlier tokens would leave its logits alone. RoPE makes them differ.
TEST(ModelsLlama, PositionsMatter) {
  zc::manual_seed(6);
  auto model = zc::models::llama(small_config());
  const Tensor a = zc::from_values<int64_t>({7, 21, 3}, {1, 3});
  const Tensor b = zc::from_values<int64_t>({21, 7, 3}, {1, 3});
  EXPECT_FALSE(zc::allclose((*model)(a).narrow(1, 2, 1), (*model)(b).narrow(1, 2, 1), 1e-4, 1e-4));
}

TEST(ModelsLlama, BadIdsAndTooLongSequences) {
  auto model = zc::models::llama(small_config());
  EXPECT_TRUE(contains(error_message([&] {
                         (*model)(zc::randn({1, 4}));
                       }),
                       "expected integer token ids of shape [B, T]"));
  EXPECT_TRUE(contains(error_message([&] { (*model)(zc::randint(0, 50, {4})); }), "[B, T]"));
  const std::string msg = error_message([&] { (*model)(zc::randint(0, 50, {1, 17})); });
  EXPECT_TRUE(contains(msg, "sequence length 17 exceeds max_position_embeddings 16")) << msg;
  // The whole context is allowed, and i32 ids too.
  EXPECT_EQ((*model)(zc::randint(0, 50, {1, 16}, zc::DType::i32)).shape(), (zc::Shape{1, 16, 50}));
}

TEST(ModelsLlama, CompiledEqualsEagerOverLengths) {
  zc::manual_seed(7);
  LlamaConfig c = small_config();
  c.rope_scaling = {.type = RopeScaling::Type::llama3,
                    .factor = 8,
                    .low_freq_factor = 1,
                    .high_freq_factor = 4,
                    .original_max_position_embeddings = 8};
  auto model = zc::models::llama(c);
  zc::CompiledModule fast = zc::compile(model);
  for (int64_t len : {5, 9, 16, 3}) {
    const Tensor ids = zc::randint(0, 50, {2, len});
    EXPECT_TRUE(zc::allclose(fast(ids), (*model)(ids), 1e-4, 1e-5)) << "length " << len;
  }
}

TEST(ModelsLlama, IsACausalLM) {
  std::shared_ptr<zc::models::CausalLM> lm = zc::models::llama(small_config());
  EXPECT_EQ(lm->vocab_size(), 50);
  EXPECT_EQ(lm->max_sequence_length(), 16);
  std::shared_ptr<zc::models::CausalLM> gpt = zc::models::gpt(zc::models::gpt_small_config(1));
  EXPECT_EQ(gpt->vocab_size(), 1024);
  EXPECT_EQ(gpt->max_sequence_length(), 128);
}

}  // namespace
