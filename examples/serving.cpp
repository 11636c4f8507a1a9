// Serving a compiled model: the first request answered while the code compiles in the
// background, other shapes warmed up before traffic, and what compiling earned.
//
//   serving     (gpt-small on the CPU; run it twice: the second start finds the caches warm)
#include <zc/zc.h>

#include <chrono>
#include <cstdio>

namespace {
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main() {
  zc::NoGradGuard no_grad;  // inference
  zc::manual_seed(0);
  auto model = zc::models::gpt(zc::models::gpt_small_config(4));
  model->eval();
  zc::Tensor tokens = zc::models::gpt_small_tokens();  // [4, 128]

  zc::CompileOptions options;
  options.async_compile = true;  // never make a request wait for the compiler
  options.roi_sampling = true;   // time a few calls eagerly for the ROI report
  zc::CompiledModule fast = zc::compile(model, options);

  // The first request: with a cold cache it runs eagerly while gpt-small compiles; with a warm
  // one, its code loads in milliseconds and the request runs it.
  auto t = std::chrono::steady_clock::now();
  zc::Tensor logits = fast(tokens);
  const double first = ms_since(t);
  zc::compiler::Stats s = zc::compiler::stats();
  std::printf("first request: %.1f ms, %s\n", first,
              s.eager_calls > 0 ? "ran eagerly while the model compiles in the background"
                                : "ran compiled code from the cache");
  fast.wait_for_compiles();

  // Warm-up: the other prompt lengths this service expects, before they arrive.
  zc::Tensor len64 = tokens.slice(1, 0, 64).contiguous();
  zc::Tensor len32 = tokens.slice(1, 0, 32).contiguous();
  zc::WarmupReport warm = fast.warmup({len64, len32});
  std::printf("%s", warm.str().c_str());

  // Traffic.
  const int64_t runs_before = zc::compiler::stats().compiler_invocations;
  for (int i = 0; i < 200; ++i) logits = fast(i % 3 == 0 ? tokens : i % 3 == 1 ? len64 : len32);
  std::printf("200 requests of 3 lengths: %lld compiler runs\n",
              static_cast<long long>(zc::compiler::stats().compiler_invocations - runs_before));
  std::printf("%s", zc::compiler::report().str().c_str());
  return 0;
}
