#include "zc/generate.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "util/timer.h"
#include "zc/autograd.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc {

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Error("zc::generate: " + what);
}

void check_options(const GenerateOptions& o) {
  if (o.max_new_tokens < 0) {
    refuse("max_new_tokens must be non-negative, got " + std::to_string(o.max_new_tokens));
  }
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) {
    refuse("temperature must be finite and non-negative (0: greedy), got " +
           std::to_string(o.temperature));
  }
  if (o.top_k < 0)
    refuse("top_k must be non-negative (0: every token), got " + std::to_string(o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    refuse("top_p must be in (0, 1] (1: every token), got " + std::to_string(o.top_p));
  }
  if (o.cache_length < 0) {
    refuse("cache_length must be non-negative (0: prompt plus new tokens), got " +
           std::to_string(o.cache_length));
  }
}

Device device_of(const models::CausalLM& model) {
  for (const Tensor& p : model.parameters()) return p.device();
  return Device::cpu();
}

// The dtype of the model's activations, and so of its logits: its first floating parameter's.
DType activation_dtype(const models::CausalLM& model) {
  for (const Tensor& p : model.parameters()) {
    if (is_floating(p.dtype())) return p.dtype();
  }
  return DType::f32;
}

// One token drawn from `row` (a sequence's logits) as the options say, with `rng`.
int64_t draw(std::vector<double> row, const GenerateOptions& o, std::mt19937_64& rng) {
  const int64_t vocab = static_cast<int64_t>(row.size());
  for (double& v : row) v /= o.temperature;
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; ties by the lower id, so that the draw depends on nothing but the seed.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  size_t keep =
      o.top_k > 0 ? std::min<size_t>(order.size(), static_cast<size_t>(o.top_k)) : order.size();
  const double top = row[order[0]];
  std::vector<double> p(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i] = std::exp(row[order[i]] - top);
  if (o.top_p < 1) {
    double reached = 0;
    size_t n = 0;
    while (n < keep && reached < o.top_p * total) reached += p[n++];
    keep = std::max<size_t>(n, 1);
    p.resize(keep);
  }
  std::discrete_distribution<size_t> pick(p.begin(), p.end());
  return order[pick(rng)];
}

// The next token of every sequence from their last logits [B, vocab].
std::vector<int64_t> choose(const Tensor& last, const GenerateOptions& o, std::mt19937_64& rng) {
  const int64_t batch = last.size(0), vocab = last.size(1);
  std::vector<int64_t> out(static_cast<size_t>(batch));
  if (o.temperature == 0) {
    // The argmax where the logits are: only B ids cross to the host.
    const Tensor ids = argmax(last, 1).to(Device::cpu()).to(DType::i64).contiguous();
    std::copy(ids.data<int64_t>(), ids.data<int64_t>() + batch, out.begin());
    return out;
  }
  const Tensor rows = last.to(Device::cpu()).to(DType::f64).contiguous();
  for (int64_t b = 0; b < batch; ++b) {
    const double* r = rows.data<double>() + b * vocab;
    out[static_cast<size_t>(b)] = draw(std::vector<double>(r, r + vocab), o, rng);
  }
  return out;
}

}  // namespace

double GenerateResult::tokens_per_s() const {
  return steps > 1 && decode_ms > 0 ? static_cast<double>(steps - 1) / (decode_ms / 1e3) : 0.0;
}

namespace {

// The prompt's mask checked (left padding of 0s, then 1s), as the cache's [B, L] mask: later
// positions hold the generated tokens.
Tensor cache_mask(const Tensor& mask, const Tensor& prompt, int64_t cache) {
  if (!mask.defined() || mask.shape() != prompt.shape()) {
    refuse("expected an attention mask of the prompt's shape " + shape_str(prompt.shape()) +
           ", got " + (mask.defined() ? shape_str(mask.shape()) : std::string("none")));
  }
  const int64_t batch = prompt.size(0), length = prompt.size(1);
  const Tensor m = mask.to(Device::cpu()).to(DType::f64).contiguous();
  const double* v = m.data<double>();
  for (int64_t b = 0; b < batch; ++b) {
    bool token = false;
    for (int64_t t = 0; t < length; ++t) {
      const double x = v[b * length + t];
      if (x != 0 && x != 1) {
        refuse("the attention mask holds " + std::to_string(x) + "; expected 0 (padding) or 1");
      }
      if (x == 0 && token) {
        refuse("sequence " + std::to_string(b) +
               "'s attention mask has padding after a token "
               "at position " +
               std::to_string(t) +
               "; generation takes left padding (pad "
               "before the prompt, as tokenizers do with padding_side='left')");
      }
      token = token || x == 1;
    }
    if (!token) refuse("sequence " + std::to_string(b) + " is padding alone");
  }
  return cat({m.to(DType::i64), ones({batch, cache - length}, DType::i64)}, 1);
}

GenerateResult run(const std::shared_ptr<models::CausalLM>& model, const Tensor& prompt,
                   const Tensor* attention_mask, const GenerateOptions& options) {
  if (!model) refuse("the model is null");
  check_options(options);
  if (!prompt.defined() || prompt.dim() != 2 || !is_integral(prompt.dtype()) ||
      prompt.numel() == 0) {
    refuse("expected token ids [B, T] of an integer dtype with B, T > 0, got " +
           (prompt.defined()
                ? std::string(dtype_name(prompt.dtype())) + " " + shape_str(prompt.shape())
                : std::string("an undefined tensor")));
  }
  const int64_t batch = prompt.size(0), length = prompt.size(1);
  const int64_t needed = length + options.max_new_tokens;
  const int64_t cache = options.cache_length > 0 ? options.cache_length : needed;
  if (needed > cache) {
    refuse("a prompt of " + std::to_string(length) + " tokens and " +
           std::to_string(options.max_new_tokens) + " new ones need " + std::to_string(needed) +
           " positions; the cache holds " + std::to_string(cache) + " (cache_length)");
  }
  if (cache > model->max_sequence_length()) {
    refuse(std::to_string(cache) + " positions exceed the model's " +
           std::to_string(model->max_sequence_length()) + " (max_sequence_length)");
  }
  GenerateResult result;
  result.tokens = zeros({batch, 0}, DType::i64);
  if (options.max_new_tokens == 0) return result;

  NoGradGuard no_grad;
  const Tensor mask_on_host =
      attention_mask ? cache_mask(*attention_mask, prompt, cache) : Tensor();
  model->allocate_cache(batch, cache);
  const Device device = device_of(*model);
  const Tensor mask = mask_on_host.defined() ? mask_on_host.to(device) : Tensor();
  std::optional<CompiledModule> compiled;
  if (options.compile) compiled = zc::compile(model, options.compile_options);
  auto step = [&](const Tensor& ids, const Tensor& positions) {
    std::vector<Tensor> in{ids, positions};
    if (mask.defined()) in.push_back(mask);
    return compiled ? (*compiled)(in)[0] : (*model)(in)[0];
  };
  std::mt19937_64 rng(options.seed);
  // On a GPU the choice of a token is eager ops (an argmax of the last logits, or their copy to
  // the host), each compiled at its first call: 147 ms of NVRTC after a cold prefill on the H200
  // host, on the way to the first token. So the same choice is made on zeros of the same shape
  // (a row of [B, 2, vocab], as the logits' last row is a row of [B, T, vocab]) on a thread of
  // its own while the prefill compiles. Its result and any error are dropped: the real choice
  // raises what it would have raised.
  std::future<void> choice_warmed;
  if (compiled && device.is_cuda()) {
    const Tensor like = zeros({batch, 2, model->vocab_size()}, activation_dtype(*model), device);
    choice_warmed = std::async(std::launch::async, [like, options, rng] {
      std::mt19937_64 scratch = rng;
      choose(like.select(1, 1), options, scratch);
    });
  }
  Timer timer;
  Tensor logits = step(prompt.to(device), arange(length).to(device));
  if (choice_warmed.valid()) choice_warmed.wait();
  const Tensor first_last = logits.select(1, length - 1);
  std::vector<int64_t> tokens = choose(first_last, options, rng);
  result.prefill_ms = timer.ms();  // the choice waited for the logits
  result.first_token_ms = result.prefill_ms;

  std::vector<int64_t> chosen;  // [steps][B]
  std::vector<bool> ended(static_cast<size_t>(batch), false);
  for (int64_t s = 0; s < options.max_new_tokens; ++s) {
    for (int64_t b = 0; b < batch; ++b) {
      if (ended[b]) tokens[b] = *options.eos_token_id;
      if (options.eos_token_id && tokens[b] == *options.eos_token_id) ended[b] = true;
    }
    chosen.insert(chosen.end(), tokens.begin(), tokens.end());
    ++result.steps;
    if (s == 0) result.first_token_ms = timer.ms();
    bool go_on = true;
    if (options.on_token) go_on = options.on_token(s, from_values(tokens, {batch}));
    const bool all_ended = std::all_of(ended.begin(), ended.end(), [](bool e) { return e; });
    if (!go_on || all_ended || s + 1 == options.max_new_tokens) break;
    const Tensor ids = from_values(tokens, {batch, 1}).to(prompt.dtype()).to(device);
    const Tensor position = from_values<int64_t>({length + s}, {1}).to(device);
    tokens = choose(step(ids, position).select(1, 0), options, rng);
  }
  result.decode_ms = timer.ms() - result.first_token_ms;
  // [steps, B] as chosen, then [B, steps].
  result.tokens = from_values(chosen, {result.steps, batch}).transpose(0, 1).contiguous();
  return result;
}

}  // namespace

GenerateResult generate(const std::shared_ptr<models::CausalLM>& model, const Tensor& prompt,
                        const GenerateOptions& options) {
  return run(model, prompt, nullptr, options);
}

GenerateResult generate(const std::shared_ptr<models::CausalLM>& model, const Tensor& prompt,
                        const Tensor& attention_mask, const GenerateOptions& options) {
  return run(model, prompt, &attention_mask, options);
}

}  // namespace zc
