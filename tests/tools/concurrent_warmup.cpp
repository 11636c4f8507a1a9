// Warm-ups of two compiled modules of different graphs, alone or on two threads at once: what
// each warm-up reports of its own compile.
//
//   concurrent_warmup --which a|b|both
//
// Each module is warmed up at two sizes (with Dynamic::Static, one graph per size). Prints
// "a {"compiler_runs":N}" and/or "b {...}" (the warm-up reports), then
// "total {"compiler_runs":N}" (the process's count, compiler::stats()); or "error: <message>"
// and exits with 3. Run it with ZC_FORCE_DISABLE_CACHES=1 so that every graph compiles.
#include <cstdio>
#include <latch>
#include <string>
#include <thread>

#include "zc/zc.h"

namespace {

struct Mlp : zc::nn::Module {
  std::shared_ptr<zc::nn::Linear> up, down;
  bool relu_between;
  Mlp(int64_t d, bool relu) : relu_between(relu) {
    up = register_module("up", std::make_shared<zc::nn::Linear>(d, 3 * d));
    down = register_module("down", std::make_shared<zc::nn::Linear>(3 * d, d));
  }
  zc::Tensor forward(const zc::Tensor& x) override {
    zc::Tensor h = (*up)(x);
    return (*down)(relu_between ? zc::relu(h) : zc::gelu(h)) + x;
  }
};

zc::WarmupReport warm(const zc::CompiledModule& fast, int64_t d) {
  return fast.warmup({zc::randn({3, d}), zc::randn({5, d})});
}

}  // namespace

int main(int argc, char** argv) {
  zc::NoGradGuard no_grad;
  std::string which = "both";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--which") which = argv[i + 1];
  }
  try {
    zc::manual_seed(0);
    const zc::CompileOptions options{.dynamic = zc::Dynamic::Static};
    zc::CompiledModule a = zc::compile(std::make_shared<Mlp>(24, false), options);
    zc::CompiledModule b = zc::compile(std::make_shared<Mlp>(40, true), options);
    zc::WarmupReport ra, rb;
    if (which == "both") {
      // Both start together, so that their compiles overlap.
      std::latch start(2);
      std::thread other([&] {
        zc::NoGradGuard no_grad_here;  // grad mode is per thread
        start.arrive_and_wait();
        rb = warm(b, 40);
      });
      start.arrive_and_wait();
      ra = warm(a, 24);
      other.join();
    } else if (which == "a") {
      ra = warm(a, 24);
    } else {
      rb = warm(b, 40);
    }
    if (which != "b") std::printf("a {\"compiler_runs\":%lld}\n", (long long)ra.compiler_runs);
    if (which != "a") std::printf("b {\"compiler_runs\":%lld}\n", (long long)rb.compiler_runs);
    std::printf("total {\"compiler_runs\":%lld}\n",
                (long long)zc::compiler::stats().compiler_invocations);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
  return 0;
}
