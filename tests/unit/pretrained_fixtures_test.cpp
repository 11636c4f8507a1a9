// from_pretrained on checkpoints transformers wrote (tests/data/llm/, made by
// tests/tools/llm_fixtures.py): zc's logits for the stored prompt against transformers', eager
// and compiled, and greedy decoding against transformers' generate(do_sample=False).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "unit/run_model.h"
#include "unit/test_support.h"
#include "zc/npy.h"
#include "zc/zc.h"

namespace {

using zc::Tensor;

const std::string kFixtures = std::string(ZC_TEST_SOURCE_DIR) + "/data/llm/";

// max |a - b| over max |b|: logits near zero make an element-wise relative error meaningless,
// and the scale of the logits is what a difference competes with when picking a token.
double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const Tensor x = a.to(zc::DType::f32).contiguous(), y = b.to(zc::DType::f32).contiguous();
  const float* p = x.data<float>();
  const float* q = y.data<float>();
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    diff = std::max(diff, std::abs(double{p[i]} - double{q[i]}));
    scale = std::max(scale, std::abs(double{q[i]}));
  }
  return diff / scale;
}

// Greedy decoding by running the whole sequence again for every new token: what generate()
// with a KV cache must reproduce.
Tensor greedy(const std::function<Tensor(const Tensor&)>& logits_of, const Tensor& prompt,
              int64_t new_tokens) {
  Tensor seq = prompt;
  for (int64_t i = 0; i < new_tokens; ++i) {
    const Tensor logits = logits_of(seq);
    const Tensor last = logits.select(1, logits.size(1) - 1);
    seq = zc::cat({seq, zc::argmax(last, -1, /*keepdim=*/true)}, 1);
  }
  return seq;
}

std::vector<int64_t> values(const Tensor& t) {
  const Tensor c = t.to(zc::DType::i64).contiguous();
  return {c.data<int64_t>(), c.data<int64_t>() + c.numel()};
}

class PretrainedFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = kFixtures + GetParam();
    prompt_ = zc_cli::read_npy(dir_ + "/prompt.npy");
    logits_ = zc_cli::read_npy(dir_ + "/logits.npy");
    greedy_ = zc_cli::read_npy(dir_ + "/greedy.npy");
    model_ = zc::models::from_pretrained(dir_);
  }
  int64_t new_tokens() const { return greedy_.size(1) - prompt_.size(1); }

  std::string dir_;
  Tensor prompt_, logits_, greedy_;
  std::shared_ptr<zc::models::CausalLM> model_;
};

TEST_P(PretrainedFixture, EagerLogitsMatchTransformers) {
  const Tensor logits = (*model_)(prompt_);
  EXPECT_EQ(logits.dtype(), zc::DType::f32);
  ASSERT_EQ(logits.shape(), logits_.shape());
  EXPECT_EQ(model_->vocab_size(), logits_.size(2));
  const double err = relative_error(logits, logits_);
  RecordProperty("relative_error", (std::ostringstream() << std::scientific << err).str());
  EXPECT_LT(err, 1e-4);
}

// Inference, as a user runs it: without the guard, compiling would also build the backward
// graphs for the parameters, which want gradients as transformers' do.
TEST_P(PretrainedFixture, CompiledLogitsMatchTransformers) {
  zc::NoGradGuard no_grad;
  zc::CompiledModule fast = zc::compile(model_);
  const Tensor logits = fast(prompt_);
  ASSERT_EQ(logits.shape(), logits_.shape());
  const double err = relative_error(logits, logits_);
  RecordProperty("relative_error", (std::ostringstream() << std::scientific << err).str());
  EXPECT_LT(err, 1e-4);
}

TEST_P(PretrainedFixture, GreedyTokensMatchTransformers) {
  ASSERT_GT(new_tokens(), 0);
  const Tensor tokens =
      greedy([&](const Tensor& ids) { return (*model_)(ids); }, prompt_, new_tokens());
  EXPECT_EQ(values(tokens), values(greedy_));
}

// Every step has another length: the compiled model sees the sequence dim vary.
TEST_P(PretrainedFixture, CompiledGreedyTokensMatchTransformers) {
  zc::NoGradGuard no_grad;
  zc::CompiledModule fast = zc::compile(model_);
  const Tensor tokens = greedy([&](const Tensor& ids) { return fast(ids); }, prompt_, new_tokens());
  EXPECT_EQ(values(tokens), values(greedy_));
}

// The same checkpoints loaded onto a GPU (PretrainedOptions::device): logits eager and
// compiled, and the greedy tokens (scripts/gpu-test.sh runs these; CI has no GPU).
TEST_P(PretrainedFixture, LogitsAndGreedyTokensOnCuda) {
  ZC_SKIP_WITHOUT_GPU();
  auto model = zc::models::from_pretrained(dir_, {.device = zc::Device::cuda(0)});
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.device().is_cuda()) << name;
  }
  zc::NoGradGuard no_grad;
  const Tensor ids = prompt_.to(zc::Device::cuda(0));
  EXPECT_LT(relative_error((*model)(ids).to(zc::Device::cpu()), logits_), 1e-4) << "eager";
  zc::CompiledModule fast = zc::compile(model);
  EXPECT_LT(relative_error(fast(ids).to(zc::Device::cpu()), logits_), 1e-4) << "compiled";
  const Tensor tokens = greedy([&](const Tensor& x) { return fast(x); }, ids, new_tokens());
  EXPECT_EQ(values(tokens.to(zc::Device::cpu())), values(greedy_));
}

// zc::generate with the KV cache: the prompt once, then one cached step per token, eagerly and
// compiled, against transformers' greedy tokens.
TEST_P(PretrainedFixture, GenerateWithTheCacheMatchesTransformers) {
  for (bool compiled : {false, true}) {
    const zc::GenerateResult r =
        zc::generate(model_, prompt_, {.max_new_tokens = new_tokens(), .compile = compiled});
    EXPECT_EQ(values(zc::cat({prompt_.to(zc::DType::i64), r.tokens}, 1)), values(greedy_))
        << (compiled ? "compiled" : "eager");
  }
}

// `zc generate DIR --prompt-ids ...`: the first prompt's greedy tokens, as transformers chose
// them, printed and in the JSON.
TEST_P(PretrainedFixture, TheGenerateCommandPrintsTransformersTokens) {
  const std::vector<int64_t> prompt = values(prompt_.select(0, 0));
  const std::vector<int64_t> want =
      values(greedy_.select(0, 0).slice(0, prompt_.size(1), greedy_.size(1)));
  auto list = [](const std::vector<int64_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
  };
  const zc::test::ProcessRun r =
      zc::test::zc_cli("ZC_CACHE_DIR=" + zc::test::test_dir("generate_cmd"),
                       "generate " + dir_ + " --prompt-ids " + list(prompt) + " --max-new-tokens " +
                           std::to_string(want.size()) + " --json - 2>/dev/null");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(zc::test::contains(r.out, list(want) + "\n")) << r.out;
  EXPECT_TRUE(zc::test::contains(r.out, "\"tokens\":[" + list(want) + "]")) << r.out;
  EXPECT_TRUE(zc::test::contains(r.out, "\"steps\":" + std::to_string(want.size()) + ",")) << r.out;
}

TEST_P(PretrainedFixture, GenerateOnCudaMatchesTransformers) {
  ZC_SKIP_WITHOUT_GPU();
  auto model = zc::models::from_pretrained(dir_, {.device = zc::Device::cuda(0)});
  const zc::GenerateResult r = zc::generate(model, prompt_, {.max_new_tokens = new_tokens()});
  EXPECT_EQ(values(zc::cat({prompt_.to(zc::DType::i64), r.tokens}, 1)), values(greedy_));
}

// Weight-only int8 (zc::quantize): the prompt's logits within kInt8Tolerance of transformers'
// f32 logits (relative to their largest), and the greedy tokens mostly transformers' (the rate
// is a test property, int8_greedy_rate); compiled on the CPU and eagerly alike. On a GPU the
// compiled step reads the int8 weights itself and chooses the CPU's tokens.
constexpr double kInt8Tolerance = 0.05;
constexpr double kInt8MinGreedyRate = 0.6;

TEST_P(PretrainedFixture, Int8LogitsAndGreedyTokensStayNearF32) {
  const zc::QuantizeReport q = zc::quantize(*model_);
  EXPECT_GT(q.layers, 0);
  EXPECT_LT(q.bytes_after * 3, q.bytes_before);  // f32 weights: 4 bytes to 1 and a scale a row
  zc::NoGradGuard no_grad;
  const Tensor eager = (*model_)(prompt_);
  const double err = relative_error(eager, logits_);
  EXPECT_LT(err, kInt8Tolerance);
  const zc::GenerateResult r =
      zc::generate(model_, prompt_, {.max_new_tokens = new_tokens(), .compile = true});
  const std::vector<int64_t> got = values(r.tokens);
  const std::vector<int64_t> want =
      values(greedy_.slice(1, prompt_.size(1), greedy_.size(1)).contiguous());
  ASSERT_EQ(got.size(), want.size());
  int64_t same = 0;
  for (size_t i = 0; i < got.size(); ++i) same += got[i] == want[i];
  const double rate = static_cast<double>(same) / static_cast<double>(got.size());
  RecordProperty("int8_logits_relative_error", std::to_string(err));
  RecordProperty("int8_greedy_rate", std::to_string(rate));
  std::printf("%s int8: logits within %.4f, greedy tokens %.2f of transformers'\n",
              GetParam().c_str(), err, rate);
  EXPECT_GE(rate, kInt8MinGreedyRate);
  if (!zc::cuda::is_available()) return;
  auto gpu = zc::models::from_pretrained(dir_, {.device = zc::Device::cuda(0)});
  zc::quantize(*gpu);
  const zc::GenerateResult g = zc::generate(gpu, prompt_, {.max_new_tokens = new_tokens()});
  EXPECT_EQ(values(g.tokens), got);
}

INSTANTIATE_TEST_SUITE_P(Llm, PretrainedFixture,
                         ::testing::Values("llama-gqa", "llama3-sharded", "llama-v4-linear",
                                           "mistral", "gpt2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// What each fixture's config.json says reaches the model: the family, and the fields that
// make the fixtures differ from each other.
TEST(PretrainedConfig, FixturesBuildTheModelTheirConfigDescribes) {
  using zc::models::RopeScaling;
  auto llama_of = [](const std::string& name) {
    auto model = zc::models::from_pretrained(kFixtures + name);
    auto* llama = dynamic_cast<zc::models::Llama*>(model.get());
    EXPECT_NE(llama, nullptr) << name;
    return llama ? llama->config : zc::models::LlamaConfig{};
  };
  const auto gqa = llama_of("llama-gqa");
  EXPECT_EQ(gqa.num_attention_heads, 4);
  EXPECT_EQ(gqa.num_key_value_heads, 2);
  EXPECT_EQ(gqa.head_dim, 16);
  EXPECT_EQ(gqa.rms_norm_eps, 1e-5);
  EXPECT_EQ(gqa.rope_scaling.type, RopeScaling::Type::none);
  EXPECT_FALSE(gqa.tie_word_embeddings);

  const auto llama3 = llama_of("llama3-sharded");
  EXPECT_EQ(llama3.head_dim, 24);
  EXPECT_EQ(llama3.num_key_value_heads, 1);
  EXPECT_EQ(llama3.rope_theta, 500000.0);
  EXPECT_EQ(llama3.rope_scaling.type, RopeScaling::Type::llama3);
  EXPECT_EQ(llama3.rope_scaling.factor, 8.0);
  EXPECT_EQ(llama3.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(llama3.rope_scaling.original_max_position_embeddings, 32);
  EXPECT_TRUE(llama3.tie_word_embeddings);
  EXPECT_TRUE(llama3.attention_bias);
  EXPECT_TRUE(llama3.mlp_bias);

  // transformers 4's spelling: rope_theta at the top, rope_scaling {"type": "linear"}.
  const auto v4 = llama_of("llama-v4-linear");
  EXPECT_EQ(v4.rope_theta, 1000.0);
  EXPECT_EQ(v4.rope_scaling.type, RopeScaling::Type::linear);
  EXPECT_EQ(v4.rope_scaling.factor, 2.0);

  auto gpt2 = zc::models::from_pretrained(kFixtures + "gpt2");
  auto* gpt = dynamic_cast<zc::models::GPT*>(gpt2.get());
  ASSERT_NE(gpt, nullptr);
  EXPECT_EQ(gpt->config.d_model, 64);
  EXPECT_EQ(gpt->config.block_size, 64);
  EXPECT_EQ(gpt->max_sequence_length(), 64);
  EXPECT_FALSE(gpt->is_training());
}

// A model of another dtype than the stored one: every weight converts on load.
TEST(PretrainedConfig, LoadsIntoTheRequestedDtype) {
  const std::string dir = kFixtures + "llama-gqa";
  auto model = zc::models::from_pretrained(dir, {.dtype = zc::DType::bf16});
  for (const auto& [name, p] : model->named_parameters()) {
    EXPECT_EQ(p.dtype(), zc::DType::bf16) << name;
  }
  const Tensor logits = (*model)(zc_cli::read_npy(dir + "/prompt.npy"));
  EXPECT_EQ(logits.dtype(), zc::DType::bf16);
  // bf16 keeps 8 bits of mantissa; two layers of it stay within a few percent of f32.
  const double err = relative_error(logits, zc_cli::read_npy(dir + "/logits.npy"));
  EXPECT_LT(err, 5e-2);
  EXPECT_GT(err, 0.0);  // it did compute in bf16
}

}  // namespace
