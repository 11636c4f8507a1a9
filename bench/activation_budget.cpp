// What CompileOptions::activation_memory_budget and nn::checkpoint trade: a GPT's compiled
// training step (forward, cross-entropy, backward, fused AdamW) at budgets 1, 0.5 and 0, and
// with every block checkpointed. One JSON line per setting: the bytes one call saves for its
// backward (compiler::stats().saved_bytes), the step's median time over --steps steps, and on
// CUDA the allocator's peak over those steps (cuda::memory_stats, reset by nothing: the first
// setting's peak includes the model, and the allocator's peak is the process's: for each
// setting's own, run one process per setting with --setting 0..3).
//
//   build/bench/activation_budget [--device cpu|cuda] [--layers 4] [--d 256] [--batch 8]
//                                 [--tokens 128] [--steps 10] [--setting 0..3]
//
// On the CPU the default is a 4-layer GPT of width 256 (2 cores take seconds a step at gpt12's
// size); on the GPU host pass --layers 12 --d 768 for gpt12.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zc/zc.h"

namespace {

struct Setting {
  std::string name;
  double budget = 1.0;
  bool checkpointed = false;
};

// Every block of `model` wrapped in nn::checkpoint.
void checkpoint_blocks(zc::models::GPT& model) {
  for (size_t i = 0; i < model.blocks->size(); ++i) {
    model.blocks->set(i, zc::nn::checkpoint((*model.blocks)[i]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu";
  int64_t layers = 4, d = 256, batch = 8, tokens = 128, steps = 10, only = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoll(argv[++i]) : 0LL; };
    if (a == "--device" && i + 1 < argc)
      device = argv[++i];
    else if (a == "--layers")
      layers = next();
    else if (a == "--d")
      d = next();
    else if (a == "--batch")
      batch = next();
    else if (a == "--tokens")
      tokens = next();
    else if (a == "--steps")
      steps = next();
    else if (a == "--setting")
      only = next();
    else {
      std::fprintf(stderr, "activation_budget: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    const bool cuda = device == "cuda";
    if (cuda && !zc::cuda::is_available()) {
      std::printf("{\"skipped\": \"no GPU\"}\n");
      return 0;
    }
    const zc::Device dev = cuda ? zc::Device::cuda(0) : zc::Device::cpu();
    const int64_t vocab = 512;
    const std::vector<Setting> settings{{"budget 1", 1.0, false},
                                        {"budget 0.5", 0.5, false},
                                        {"budget 0", 0.0, false},
                                        {"checkpoint every block", 1.0, true}};
    for (size_t i = 0; i < settings.size(); ++i) {
      if (only >= 0 && static_cast<size_t>(only) != i) continue;
      const Setting& s = settings[i];
      zc::manual_seed(0);
      zc::models::GPTConfig cfg{.vocab_size = vocab,
                                .block_size = tokens,
                                .n_layer = layers,
                                .n_head = std::max<int64_t>(1, d / 64),
                                .d_model = d};
      auto model = zc::models::gpt(cfg);
      if (s.checkpointed) checkpoint_blocks(*model);
      model->to(dev);
      zc::CompiledModule fast = zc::compile(model, {.activation_memory_budget = s.budget});
      zc::optim::AdamW opt(model->parameters(), {.lr = 1e-4, .fused = true});
      const zc::Tensor ids = zc::randint(0, vocab, {batch, tokens}).to(dev);
      const zc::Tensor targets = zc::randint(0, vocab, {batch * tokens}).to(dev);
      auto step = [&] {
        const zc::Tensor logits = fast(ids).reshape({-1, vocab});
        zc::Tensor loss = zc::nn::functional::cross_entropy(logits, targets);
        opt.zero_grad();
        loss.backward();
        opt.step();
        return loss;
      };
      step().item<double>();  // compiles (or loads) both halves
      const zc::compiler::Stats before = zc::compiler::stats();
      std::vector<double> ms;
      for (int64_t k = 0; k < steps; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        step().item<double>();  // waits for the step
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      const zc::compiler::Stats after = zc::compiler::stats();
      std::sort(ms.begin(), ms.end());
      const int64_t calls = std::max<int64_t>(1, after.training_calls - before.training_calls);
      std::printf(
          "{\"bench\": \"activation_budget\", \"device\": \"%s\", \"layers\": %lld, \"d\": %lld, "
          "\"batch\": %lld, \"tokens\": %lld, \"setting\": \"%s\", \"budget\": %.2f, "
          "\"saved_bytes_per_call\": %lld, \"step_ms_median\": %.3f",
          device.c_str(), static_cast<long long>(layers), static_cast<long long>(d),
          static_cast<long long>(batch), static_cast<long long>(tokens), s.name.c_str(), s.budget,
          static_cast<long long>((after.saved_bytes - before.saved_bytes) / calls),
          ms[ms.size() / 2]);
      if (cuda) {
        std::printf(
            ", \"cuda_peak_allocated_bytes\": %llu",
            static_cast<unsigned long long>(zc::cuda::memory_stats(0).peak_allocated_bytes));
      }
      std::printf("}\n");
      std::fflush(stdout);
    }
  } catch (const zc::Error& e) {
    std::fprintf(stderr, "activation_budget: %s\n", e.what());
    return 1;
  }
  return 0;
}
