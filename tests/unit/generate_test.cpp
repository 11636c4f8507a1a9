// Decoding with the KV cache (docs/generation.md): a Llama's cached steps against the whole
// sequence run again, eagerly and compiled; zc::generate's greedy tokens against argmax of the
// whole sequence at every step, its compiles bounded whatever the lengths, sampling that
// repeats with its seed, eos and the callback, a left-padded batch against its prompts run one
// by one, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using models::Llama;
using models::LlamaConfig;

LlamaConfig small_config() {
  LlamaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;  // grouped-query attention: two query heads per key-value head
  c.max_position_embeddings = 32;
  return c;
}

std::vector<int64_t> values(const Tensor& t) {
  const Tensor c = t.to(DType::i64).contiguous();
  return {c.data<int64_t>(), c.data<int64_t>() + c.numel()};
}

Tensor positions(int64_t start, int64_t n) {
  return arange(start + n).slice(0, start, start + n);
}

// max |a - b| over max |b|.
double relative_error(const Tensor& a, const Tensor& b) {
  const double scale = amax(abs(b)).item<float>();
  return amax(abs(a - b)).item<float>() / scale;
}

std::shared_ptr<models::CausalLM> small_gpt() {
  auto m = models::gpt(models::GPTConfig{
      .vocab_size = 64, .block_size = 32, .n_layer = 3, .n_head = 4, .d_model = 32});
  m->eval();
  return m;
}

std::shared_ptr<models::CausalLM> small_model(int which) {
  if (which == 1) return small_gpt();
  return models::llama(small_config());
}

// The prompt's logits and every later step's, with the cache, equal the whole sequence's
// logits at those positions: eagerly and compiled, for a batch of two, for a Llama (grouped
// heads) and GPT-2.
TEST(Generate, CachedStepsEqualTheWholeSequenceRunAgain) {
  manual_seed(11);
  NoGradGuard no_grad;
  for (int which : {0, 1}) {
    SCOPED_TRACE(which ? "GPT-2" : "Llama");
    auto model = small_model(which);
    const Tensor seq = randint(0, 64, {2, 12});
    const Tensor whole = (*model)(seq);  // [2, 12, 64]
    for (bool compiled : {false, true}) {
      SCOPED_TRACE(compiled ? "compiled" : "eager");
      model->allocate_cache(2, 16);
      std::optional<CompiledModule> fast;
      if (compiled) fast = compile(model);
      auto step = [&](const Tensor& ids, const Tensor& pos) {
        const std::vector<Tensor> in{ids, pos};
        return compiled ? (*fast)(in)[0] : (*model)(in)[0];
      };
      const Tensor prefill = step(seq.slice(1, 0, 5), positions(0, 5));
      EXPECT_LT(relative_error(prefill, whole.slice(1, 0, 5)), 1e-5);
      for (int64_t p = 5; p < 12; ++p) {
        const Tensor logits = step(seq.slice(1, p, p + 1), positions(p, 1));
        EXPECT_LT(relative_error(logits, whole.slice(1, p, p + 1)), 1e-5) << "position " << p;
      }
      // Positions 9..11 again, as one step of three: the cache's rows are rewritten in place.
      const Tensor three = step(seq.slice(1, 9, 12), positions(9, 3));
      EXPECT_LT(relative_error(three, whole.slice(1, 9, 12)), 1e-5);
    }
  }
}

// Greedy generation: each token is the argmax of the whole sequence's last logits.
TEST(Generate, GreedyTokensAreTheArgmaxOfTheWholeSequenceAtEveryStep) {
  manual_seed(12);
  NoGradGuard no_grad;
  for (int which : {0, 1}) {
    SCOPED_TRACE(which ? "GPT-2" : "Llama");
    auto model = small_model(which);
    const Tensor prompt = randint(0, 64, {2, 6});
    Tensor seq = prompt;
    for (int i = 0; i < 10; ++i) {
      const Tensor logits = (*model)(seq);
      seq = cat({seq, argmax(logits.select(1, seq.size(1) - 1), -1, /*keepdim=*/true)}, 1);
    }
    const std::vector<int64_t> want = values(seq.slice(1, 6, 16));
    for (bool compiled : {false, true}) {
      SCOPED_TRACE(compiled ? "compiled" : "eager");
      GenerateResult r = generate(model, prompt, {.max_new_tokens = 10, .compile = compiled});
      EXPECT_EQ(r.steps, 10);
      EXPECT_EQ(r.tokens.shape(), (Shape{2, 10}));
      EXPECT_EQ(values(r.tokens), want);
      EXPECT_GT(r.tokens_per_s(), 0);
      EXPECT_GE(r.first_token_ms, r.prefill_ms);
    }
  }
}

// A generation compiles the prompt's graph and the step's, whatever the number of tokens; a
// second one (more tokens, another prompt of that length) compiles nothing new.
TEST(Generate, CompilesAreBoundedWhateverTheLengths) {
  manual_seed(13);
  NoGradGuard no_grad;
  auto model = models::llama(small_config());
  compiler::reset();
  compiler::reset_stats();
  generate(model, randint(0, 64, {1, 5}), {.max_new_tokens = 4, .cache_length = 32});
  // Two traces: the prompt's graph and the step's (each compiled as its parts: the layers'
  // block once, and the glue around it).
  EXPECT_EQ(compiler::stats().graphs_captured, 2);
  const int64_t compiled_graphs = compiler::stats().code_cache_misses;
  generate(model, randint(0, 64, {1, 5}), {.max_new_tokens = 20, .cache_length = 32});
  EXPECT_EQ(compiler::stats().code_cache_misses, compiled_graphs);
}

// Prompts of other lengths: the first generation's compiles make size templates (the prompt's
// length varies in its graph), and every later length is served by them without a compiler
// run (on the 2-core machine: 6 compiler runs for lengths 5, 9, 7, 12, 20, 3 together).
TEST(Generate, EveryPromptLengthIsServedByTheFirstGenerationsCompiles) {
  manual_seed(18);
  NoGradGuard no_grad;
  LlamaConfig c = small_config();
  c.max_position_embeddings = 64;
  auto model = models::llama(c);
  compiler::reset();
  compiler::reset_stats();
  generate(model, randint(0, 64, {1, 5}), {.max_new_tokens = 4, .cache_length = 32});
  const int64_t first = compiler::stats().compiler_invocations;
  for (int64_t length : {9, 7, 12, 20, 3}) {
    generate(model, randint(0, 64, {1, length}), {.max_new_tokens = 4, .cache_length = 32});
    EXPECT_EQ(compiler::stats().compiler_invocations, first) << "prompt of " << length;
  }
  EXPECT_GT(compiler::stats().template_hits, 0);
}

TEST(Generate, SamplingRepeatsWithItsSeedAndNarrowsAsAsked) {
  manual_seed(14);
  NoGradGuard no_grad;
  auto model = models::llama(small_config());
  const Tensor prompt = randint(0, 64, {1, 4});
  auto run = [&](GenerateOptions o) {
    o.max_new_tokens = 12;
    o.compile = false;
    return values(generate(model, prompt, o).tokens);
  };
  const std::vector<int64_t> greedy = run({});
  const std::vector<int64_t> a = run({.temperature = 1.5, .seed = 7});
  EXPECT_EQ(run({.temperature = 1.5, .seed = 7}), a);
  EXPECT_NE(run({.temperature = 1.5, .seed = 8}), a);
  // One candidate left: the draw is the greedy token.
  EXPECT_EQ(run({.temperature = 1.5, .top_k = 1, .seed = 9}), greedy);
  EXPECT_EQ(run({.temperature = 1.5, .top_p = 1e-9, .seed = 9}), greedy);
}

TEST(Generate, EosEndsASequenceAndTheCallbackSeesEveryStep) {
  manual_seed(15);
  NoGradGuard no_grad;
  auto model = models::llama(small_config());
  const Tensor prompt = randint(0, 64, {2, 4});
  const std::vector<int64_t> free_run =
      values(generate(model, prompt, {.max_new_tokens = 6, .compile = false}).tokens);
  // The first sequence's third token as eos: it repeats from there; the generation runs on
  // for the second unless that one meets it too.
  const int64_t eos = free_run[2];
  GenerateResult r =
      generate(model, prompt, {.max_new_tokens = 6, .eos_token_id = eos, .compile = false});
  const std::vector<int64_t> got = values(r.tokens);
  for (int64_t s = 2; s < r.steps; ++s) EXPECT_EQ(got[static_cast<size_t>(s)], eos);
  for (int64_t s = 0; s < 3; ++s) EXPECT_EQ(got[s], free_run[s]);
  // The callback: every step in order, and false stops after that step.
  std::vector<int64_t> seen;
  GenerateResult stopped = generate(model, prompt,
                                    {.max_new_tokens = 6,
                                     .on_token =
                                         [&](int64_t step, const Tensor& tokens) {
                                           seen.push_back(step);
                                           EXPECT_EQ(tokens.shape(), (Shape{2}));
                                           return step < 2;
                                         },
                                     .compile = false});
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(stopped.steps, 3);
}

// Prompts of two lengths in one batch, the shorter left-padded (its padding ids arbitrary):
// each sequence's tokens are what it gets alone, eagerly and compiled.
TEST(Generate, ALeftPaddedBatchEqualsItsPromptsRunOneByOne) {
  manual_seed(17);
  NoGradGuard no_grad;
  for (int which : {0, 1}) {
    SCOPED_TRACE(which ? "GPT-2" : "Llama");
    auto model = small_model(which);
    const Tensor a = randint(0, 64, {1, 8}), b = randint(0, 64, {1, 5});
    const Tensor batch = cat({a, cat({full({1, 3}, 7.0, DType::i64), b}, 1)}, 0);  // [2, 8]
    const Tensor mask = cat(
        {ones({1, 8}, DType::i64), cat({zeros({1, 3}, DType::i64), ones({1, 5}, DType::i64)}, 1)},
        0);
    for (bool compiled : {false, true}) {
      SCOPED_TRACE(compiled ? "compiled" : "eager");
      const GenerateOptions o{.max_new_tokens = 8, .compile = compiled};
      const std::vector<int64_t> alone_a = values(generate(model, a, o).tokens);
      const std::vector<int64_t> alone_b = values(generate(model, b, o).tokens);
      const std::vector<int64_t> together = values(generate(model, batch, mask, o).tokens);
      EXPECT_EQ(std::vector<int64_t>(together.begin(), together.begin() + 8), alone_a);
      EXPECT_EQ(std::vector<int64_t>(together.begin() + 8, together.end()), alone_b);
    }
    // A mask of all ones is the unpadded batch.
    const Tensor two = cat({a, a}, 0);
    EXPECT_EQ(values(generate(model, two, ones({2, 8}, DType::i64), {.max_new_tokens = 4}).tokens),
              values(generate(model, two, {.max_new_tokens = 4}).tokens));
  }
}

TEST(Generate, AMaskThatIsNotLeftPaddingIsAnError) {
  auto model = models::llama(small_config());
  const Tensor prompt = randint(0, 64, {2, 4});
  auto mask_of = [](std::vector<int64_t> v) { return from_values(v, {2, 4}); };
  const GenerateOptions short_run{.max_new_tokens = 4};
  test::expect_error_containing(
      [&] {
        generate(model, prompt, mask_of({1, 1, 1, 1, 1, 1, 0, 0}), short_run);
      },
      "padding after a token at position 2");
  test::expect_error_containing(
      [&] {
        generate(model, prompt, mask_of({1, 1, 1, 1, 0, 0, 0, 0}), short_run);
      },
      "sequence 1 is padding alone");
  test::expect_error_containing(
      [&] {
        generate(model, prompt, mask_of({1, 1, 1, 1, 0, 2, 1, 1}), short_run);
      },
      "expected 0");
  test::expect_error_containing(
      [&] {
        generate(model, prompt, ones({2, 5}, DType::i64), short_run);
      },
      "of the prompt's shape [2,4]");
}

TEST(Generate, BadInputIsAnError) {
  manual_seed(16);
  auto model = models::llama(small_config());
  const Tensor prompt = randint(0, 64, {1, 8});
  test::expect_error_containing(
      [&] { generate(model, prompt, {.max_new_tokens = 10, .cache_length = 12}); },
      "need 18 positions; the cache holds 12");
  test::expect_error_containing([&] { generate(model, prompt, {.max_new_tokens = 30}); },
                                "exceed the model's 32");
  test::expect_error_containing([&] { generate(model, randint(0, 64, {8})); },
                                "expected token ids [B, T]");
  test::expect_error_containing([&] { generate(model, prompt, {.temperature = -1}); },
                                "temperature");
  test::expect_error_containing([&] { generate(model, prompt, {.top_p = 0}); }, "top_p");
  // A step outside the cache, eagerly; and a step before the cache exists.
  auto fresh = models::llama(small_config());
  test::expect_error_containing(
      [&] {
        (*fresh)(std::vector<Tensor>{prompt, positions(0, 8)});
      },
      "allocate_cache");
  NoGradGuard no_grad;
  fresh->allocate_cache(1, 10);
  test::expect_error_containing(
      [&] {
        (*fresh)(std::vector<Tensor>{prompt, positions(4, 8)});
      },
      "positions 4..11 are outside the KV cache of 10 positions");
  test::expect_error_containing(
      [&] {
        (*fresh)(std::vector<Tensor>{randint(0, 64, {2, 8}), positions(0, 8)});
      },
      "the KV cache holds 1 sequences, the step has 2");
  // GPT-2's step: positions outside its cache, and a mask of another shape.
  auto gpt = small_gpt();
  gpt->allocate_cache(1, 10);
  test::expect_error_containing(
      [&] {
        (*gpt)(std::vector<Tensor>{prompt, positions(4, 8)});
      },
      "positions 4..11 are outside the KV cache of 10 positions");
  test::expect_error_containing(
      [&] {
        (*gpt)(std::vector<Tensor>{prompt, positions(0, 8), ones({1, 8}, DType::i64)});
      },
      "expected an attention mask [1, 10]");
}

}  // namespace
}  // namespace zc
