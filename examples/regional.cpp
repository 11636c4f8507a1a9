// Regional compilation: a model whose layers repeat compiles each distinct layer once.
//
// By default (Regions::Auto) zc::compile finds the repeated block itself; zc::compiled()
// does it by hand for a model that stays eager around its blocks, like torch.compile's
// regional recipe. Regions::None compiles one flat graph: best cross-layer fusion, but the
// compile time grows with depth.
#include <zc/zc.h>

#include <chrono>
#include <cstdio>

namespace {
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main() {
  zc::NoGradGuard no_grad;  // inference: no gradients recorded
  zc::Tensor x = zc::randn({10, 10});
  for (int layers : {8, 64}) {
    auto model = zc::models::seed_model(layers);
    zc::compiler::reset();  // forget graphs compiled in this process (the disk cache stays)
    zc::compiler::reset_stats();
    auto t = std::chrono::steady_clock::now();
    zc::compile(model)(x);  // Regions::Auto
    zc::compiler::Stats s = zc::compiler::stats();
    std::printf(
        "%2d layers, automatic: %7.1f ms, %lld calls of %lld repeated block(s), %lld graphs\n",
        layers, ms_since(t), static_cast<long long>(s.regions_found),
        static_cast<long long>(s.region_graphs), static_cast<long long>(s.parts_compiled));
  }
  zc::compiler::reset();
  zc::compiler::reset_stats();
  auto t = std::chrono::steady_clock::now();
  // Every layer compiled by hand, as torch.compile's regional recipe does it.
  auto manual = std::make_shared<zc::models::SeedModel>(
      64, 10, [](std::shared_ptr<zc::nn::Module> layer) { return zc::compiled(layer); });
  (*manual)(x);
  std::printf("64 layers, by hand:   %7.1f ms, %lld graph compiled, %lld instances reuse it\n",
              ms_since(t), static_cast<long long>(zc::compiler::stats().code_cache_misses),
              static_cast<long long>(zc::compiler::stats().code_cache_hits));
  return 0;
}
