// Training a small GPT on a synthetic task: each sequence is 8 random tokens, a separator, then
// the same 8 tokens again; the model learns to copy, so the loss on the second half falls
// towards 0. Compiled: the model's forward and backward are compiled graphs (the first step
// compiles them, or loads them from the cache), and the AdamW update is one fused compiled
// kernel. Prints the loss and the time of each step.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "zc/zc.h"

namespace {

constexpr int64_t kVocab = 16, kHalf = 8, kSeparator = kVocab - 1;

// [batch, 2 * kHalf + 1] token ids: x, separator, x.
zc::Tensor copy_batch(int64_t batch) {
  zc::Tensor x = zc::randint(0, kSeparator, {batch, kHalf});
  zc::Tensor sep = zc::full({batch, 1}, static_cast<double>(kSeparator), zc::DType::i64);
  return zc::cat({x, sep, x}, 1);
}

}  // namespace

int main() {
  zc::manual_seed(0);
  zc::models::GPTConfig cfg{
      .vocab_size = kVocab, .block_size = 2 * kHalf + 1, .n_layer = 2, .n_head = 4, .d_model = 64};
  auto model = zc::models::gpt(cfg);
  zc::CompiledModule fast = zc::compile(model);
  zc::optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.0, .fused = true});

  const int steps = 300;
  double first = 0, last = 0, later_ms = 0;
  for (int step = 1; step <= steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    zc::Tensor seq = copy_batch(32);
    zc::Tensor inputs = seq.slice(1, 0, 2 * kHalf);
    // Only the copied half is predictable: the first half's targets are ignored.
    zc::Tensor targets = seq.slice(1, 1, 2 * kHalf + 1).clone();
    zc::Tensor mask = zc::ge(zc::arange(2 * kHalf).reshape({1, -1}), zc::full({}, kHalf));
    targets = zc::where(mask, targets, zc::full({}, -100.0, zc::DType::i64));
    zc::Tensor logits = fast(inputs);
    zc::Tensor loss =
        zc::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step > 1) later_ms += ms;
    last = loss.item<double>();
    if (step == 1) first = last;
    if (step == 1 || step % 50 == 0) {
      std::printf("step %3d  loss %.4f  %.1f ms/step\n", step, last, ms);
    }
  }
  std::printf("loss %.4f -> %.4f (chance: %.4f), %.1f ms per step after the first\n", first, last,
              std::log(static_cast<double>(kSeparator)), later_ms / (steps - 1));
  // The example is also a test: copying must have been learned, at least in part.
  return last < 0.5 * first ? 0 : 1;
}
