// Calls one compiled gpt-small with several sequence lengths in a fresh process and reports,
// per call, how many times the system compiler ran and how far the output is from eager: what
// the dynamic-shape tests count.
//
//   dynamic_lengths [--dynamic auto|static|marked|all] [--layers N] [--batch B] [--steady R]
//                   [--device cpu|cuda] [--d-model D --heads H] [--pooled] [--train] LENGTH...
//
// The model is gpt-small with N layers (d=256, 4 heads) unless --d-model and --heads say
// otherwise (768 and 12: the 12-layer GPT of the GPU comparisons). With --pooled it is
// test::PooledGPT over the same layers: two inputs (ids and weights, both of the length) and
// two outputs, max_diff over both. With --train each call wants gradients (as a training step:
// the parameters', of the sum of the outputs), the compiler runs count the backward's too, and
// max_diff also takes each parameter's gradient against eager's (relative to its largest).
// Times on cuda include waiting for the GPU.
//
// Prints one line per call, "call <length> compiler_runs <n> template_hits <n> recompiles <n>
// max_diff <d> ms <first-call ms>" (with --steady, "steady_ms <median of R more calls>" added),
// then "compiler <json>"; or "error: <message>" and exits with 3.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "pooled_gpt.h"
#include "zc/cuda.h"
#include "zc/zc.h"

int main(int argc, char** argv) {
  bool train = false;
  for (int i = 1; i < argc; ++i) train = train || std::string(argv[i]) == "--train";
  std::optional<zc::NoGradGuard> no_grad;
  if (!train) no_grad.emplace();
  std::string dynamic = "auto";
  int64_t layers = 2, batch = 2, steady = 0, d_model = 0, heads = 0;
  std::string device = "cpu";
  bool pooled = false;
  std::vector<int64_t> lengths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dynamic" && i + 1 < argc) {
      dynamic = argv[++i];
    } else if (a == "--layers" && i + 1 < argc) {
      layers = std::stoll(argv[++i]);
    } else if (a == "--steady" && i + 1 < argc) {
      steady = std::stoll(argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::stoll(argv[++i]);
    } else if (a == "--device" && i + 1 < argc) {
      device = argv[++i];
    } else if (a == "--d-model" && i + 1 < argc) {
      d_model = std::stoll(argv[++i]);
    } else if (a == "--heads" && i + 1 < argc) {
      heads = std::stoll(argv[++i]);
    } else if (a == "--pooled") {
      pooled = true;
    } else if (a == "--train") {
    } else {
      lengths.push_back(std::stoll(a));
    }
  }
  try {
    zc::manual_seed(0);
    zc::models::GPTConfig config = zc::models::gpt_small_config(layers);
    if (d_model > 0) config.d_model = d_model;
    if (heads > 0) config.n_head = heads;
    const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
    config.block_size = std::max(config.block_size, longest);
    std::shared_ptr<zc::nn::Module> model;
    if (pooled) {
      model = std::make_shared<zc::test::PooledGPT>(config);
    } else {
      model = zc::models::gpt(config);
    }
    model->eval();
    const zc::Device dev = device == "cuda" ? zc::Device::cuda(0) : zc::Device::cpu();
    const bool gpu = dev.is_cuda();
    model->to(dev);
    zc::CompileOptions options;
    if (dynamic == "static") options.dynamic = zc::Dynamic::Static;
    if (dynamic == "all") options.dynamic = zc::Dynamic::All;
    if (dynamic == "marked") {
      options.dynamic_dims = {{.input = 0, .dim = 1, .min = 2, .max = config.block_size}};
      if (pooled) options.dynamic_dims.push_back({.input = 1, .dim = 1, .max = config.block_size});
    }
    zc::CompiledModule fast = zc::compile(model, options);
    auto finish = [&] {
      if (gpu) zc::cuda::synchronize();
    };
    for (int64_t t : lengths) {
      zc::Tensor tokens = zc::randint(0, config.vocab_size, {batch, t}).to(dev);
      const std::vector<zc::Tensor> inputs{tokens, zc::test::token_weights(tokens)};
      // Every output of a call, compiled or eager.
      auto run = [&](bool compiled) -> std::vector<zc::Tensor> {
        if (pooled) return compiled ? fast(inputs) : (*model)(inputs);
        return {compiled ? fast(tokens) : (*model)(tokens)};
      };
      // The parameters' gradients of the outputs' sum (--train), taken out of the parameters.
      const std::vector<zc::Tensor> params = model->parameters();
      auto gradients = [&](const std::vector<zc::Tensor>& outs) {
        std::vector<zc::Tensor> grads;
        if (!train) return grads;
        for (const zc::Tensor& p : params) p.mutable_grad() = zc::Tensor();
        zc::Tensor total = zc::sum(outs[0]);
        for (size_t i = 1; i < outs.size(); ++i) total = total + zc::sum(outs[i]);
        total.backward();
        for (const zc::Tensor& p : params) grads.push_back(p.grad());
        return grads;
      };
      finish();
      auto before = zc::compiler::stats();
      auto t0 = std::chrono::steady_clock::now();
      std::vector<zc::Tensor> y = run(true);
      const std::vector<zc::Tensor> grads = gradients(y);
      finish();
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      auto after = zc::compiler::stats();
      std::vector<zc::Tensor> eager = run(false);
      const std::vector<zc::Tensor> eager_grads = gradients(eager);
      double diff = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        diff = std::max(diff, zc::max(zc::abs(y[i] - eager[i])).item<double>());
      }
      for (size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined() || !eager_grads[i].defined()) {
          diff = grads[i].defined() == eager_grads[i].defined() ? diff : 1e30;
          continue;
        }
        const double scale = zc::max(zc::abs(eager_grads[i])).item<double>() + 1e-6;
        diff = std::max(diff, zc::max(zc::abs(grads[i] - eager_grads[i])).item<double>() / scale);
      }
      std::printf(
          "call %lld compiler_runs %lld template_hits %lld recompiles %lld max_diff %.3g ms %.3f",
          static_cast<long long>(t),
          static_cast<long long>(after.compiler_invocations - before.compiler_invocations),
          static_cast<long long>(after.template_hits - before.template_hits),
          static_cast<long long>(after.recompiles - before.recompiles), diff, ms);
      if (steady > 0) {
        std::vector<double> times;
        for (int64_t r = 0; r < steady; ++r) {
          auto s0 = std::chrono::steady_clock::now();
          run(true);
          finish();
          times.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0)
                  .count());
        }
        std::sort(times.begin(), times.end());
        std::printf(" steady_ms %.4f", times[times.size() / 2]);
      }
      std::printf("\n");
    }
    std::printf("compiler %s\n", zc::compiler::stats().json().c_str());
    return 0;
  } catch (const zc::Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
}
