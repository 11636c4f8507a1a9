// A compiled training step in a fresh process, for the tests and benchmarks of compiled
// training across processes (caches, bundles): the model compiled, mse_loss (seed) or next-token
// cross_entropy (gpt), backward through the compiled backward, the fused AdamW update.
//
//   train_step [--model seed|gpt] [--layers N] [--steps K] [--device cpu|cuda]
//              [--load BUNDLE] [--save BUNDLE]
//
// Prints "first_step_ms <ms>" (everything the first step did, compiles included, up to its
// result), "step_ms <median of the later steps>", "compiles <system compiler runs>",
// "loss <each step's loss, space separated>", and "stats <compiler::stats() JSON>".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "support/bundle_file.h"
#include "zc/zc.h"

namespace {
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main(int argc, char** argv) {
  std::string model = "seed", device = "cpu", load, save;
  int64_t layers = 8, steps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model = value;
    if (flag == "--layers") layers = std::stoll(value);
    if (flag == "--steps") steps = std::stoll(value);
    if (flag == "--device") device = value;
    if (flag == "--load") load = value;
    if (flag == "--save") save = value;
  }
  try {
    if (!load.empty()) zc::cache::load_artifacts(zc_support::read_bundle(load));
    const zc::Device dev = device == "cuda" ? zc::Device::cuda(0) : zc::Device::cpu();
    zc::manual_seed(0);
    std::shared_ptr<zc::nn::Module> m;
    zc::Tensor x, target;
    int64_t vocab = 0;
    if (model == "gpt") {
      zc::models::GPTConfig cfg = zc::models::gpt_small_config(layers);
      vocab = cfg.vocab_size;
      m = zc::models::gpt(cfg);
      zc::Tensor tokens = zc::models::gpt_small_tokens();
      x = tokens.slice(1, 0, tokens.size(1) - 1).contiguous();
      target = tokens.slice(1, 1, tokens.size(1)).reshape({-1});
    } else {
      m = zc::models::seed_model(layers);
      x = zc::randn({10, 10});
      target = zc::randn({10, 10});
    }
    m->to(dev);
    x = x.to(dev);
    target = target.to(dev);
    zc::CompiledModule fast = zc::compile(m);
    zc::optim::AdamW opt(m->parameters(), {.lr = 1e-3, .fused = true});
    std::vector<double> losses, times;
    for (int64_t step = 0; step < steps; ++step) {
      auto t = std::chrono::steady_clock::now();
      zc::Tensor out = fast(x);
      zc::Tensor loss = vocab ? zc::nn::functional::cross_entropy(out.reshape({-1, vocab}), target)
                              : zc::nn::functional::mse_loss(out, target);
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (dev.is_cuda()) zc::cuda::synchronize();
      times.push_back(ms_since(t));
      losses.push_back(loss.item<double>());
    }
    std::printf("first_step_ms %.3f\n", times[0]);
    std::vector<double> later(times.begin() + 1, times.end());
    std::sort(later.begin(), later.end());
    std::printf("step_ms %.3f\n", later.empty() ? 0.0 : later[later.size() / 2]);
    zc::compiler::Stats s = zc::compiler::stats();
    std::printf("compiles %lld\n", static_cast<long long>(s.compiler_invocations));
    std::printf("loss");
    for (double l : losses) std::printf(" %.9g", l);
    std::printf("\nstats %s\n", s.json().c_str());
    if (!save.empty()) zc_support::save_bundle(save);
  } catch (const zc::Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
  return 0;
}
