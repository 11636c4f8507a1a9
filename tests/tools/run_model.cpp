// Compiles and runs a model in a fresh process and reports what happened, for tests of
// behaviour that spans processes (compiler discovery, persistent caches, bundles).
//
//   run_model [--model seed|gpt] [--layers N] [--weights-seed S] [--load BUNDLE]
//             [--save BUNDLE] [--regions auto|none|manual] [--device cpu|cuda]
//             [--check eager|none] [--mode default|max-autotune]
//
// Prints "output <sha256 of the output bytes>", "max_diff <|compiled - eager|>",
// "first_call_ms <ms>", "compiler <json>", "cache <json>" (and "load <json>" with --load), one
// per line, then "choice <line>" for each of compiler::autotune_choices(); or "error: <message>"
// and exits with 3. `--check none` runs no eager reference (max_diff 0) and exits right after the
// first call, as a short-lived process would.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "support/bench_model.h"
#include "support/bundle_file.h"
#include "util/hash.h"
#include "zc/zc.h"

int main(int argc, char** argv) {
  zc::NoGradGuard no_grad;  // inference only
  std::string model = "seed", load, save, regions = "auto", device = "cpu", check = "eager",
              mode = "default";
  int64_t layers = 4;
  uint64_t weights_seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model = value;
    if (flag == "--layers") layers = std::stoll(value);
    if (flag == "--weights-seed") weights_seed = std::stoull(value);
    if (flag == "--load") load = value;
    if (flag == "--save") save = value;
    if (flag == "--regions") regions = value;
    if (flag == "--device") device = value;
    if (flag == "--check") check = value;
    if (flag == "--mode") mode = value;
  }
  try {
    if (!load.empty()) {
      std::printf("load %s\n",
                  zc::cache::load_artifacts(zc_support::read_bundle(load)).json().c_str());
    }
    zc::manual_seed(weights_seed);
    zc_support::BenchModel bench = zc_support::make_bench_model(model, layers, regions == "manual");
    std::shared_ptr<zc::nn::Module> m = bench.module;
    zc::Tensor x = bench.input;
    if (device == "cuda") {
      m->to(zc::Device::cuda(0));
      x = x.to(zc::Device::cuda(0));
    }
    zc::CompileOptions options;
    options.regions = regions == "none" ? zc::Regions::None : zc::Regions::Auto;
    if (mode == "max-autotune") options.mode = zc::Mode::MaxAutotune;
    std::function<zc::Tensor(const zc::Tensor&)> fast;
    if (regions == "manual") {
      fast = [m](const zc::Tensor& t) {
        return (*m)(t);
      };  // the model stays eager around its blocks
    } else {
      auto compiled = zc::compile(m, options);
      fast = [compiled](const zc::Tensor& t) { return compiled(t); };
    }
    auto t0 = std::chrono::steady_clock::now();
    zc::Tensor y = fast(x);
    if (device == "cuda") zc::cuda::synchronize();  // the first call ends when its result is there
    double first_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    y = y.to(zc::Device::cpu());
    zc::Tensor ref = check == "none" ? y : (*m)(x).to(zc::Device::cpu());
    std::printf("output %s\n",
                zc::hex(zc::sha256(std::span<const uint8_t>(
                            static_cast<const uint8_t*>(y.raw_data()), y.numel() * 4)))
                    .c_str());
    std::printf("max_diff %.3g\n", zc::max(zc::abs(y - ref)).item<double>());
    std::printf("first_call_ms %.3f\n", first_ms);
    std::printf("compiler %s\n", zc::compiler::stats().json().c_str());
    std::printf("cache %s\n", zc::cache::stats().json().c_str());
    for (const std::string& c : zc::compiler::autotune_choices())
      std::printf("choice %s\n", c.c_str());
    if (!save.empty()) zc_support::save_bundle(save);
    return 0;
  } catch (const zc::Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
}
