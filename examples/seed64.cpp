// The regional-compilation recipe's model: one Linear(10, 10) followed by 64 identical layers
// of Linear -> ReLU -> sigmoid -> Linear -> ReLU. Runs it eagerly, then compiled: the first
// compiled call captures, lowers, generates C++ and compiles it (or, in a process that finds
// the graph in the cache, only loads it); later calls run the generated code.
#include <zc/zc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

// Median microseconds per call of f: robust to the odd slow call.
template <class F>
double median_us(F&& f, int calls = 200) {
  std::vector<double> us;
  for (int i = 0; i < calls; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

}  // namespace

int main() {
  zc::NoGradGuard no_grad;  // inference: no gradients recorded
  zc::manual_seed(0);       // same weights and input on every run and every machine
  auto model = zc::models::seed_model(64);
  model->eval();
  zc::Tensor x = zc::randn({10, 10});

  zc::Tensor eager = (*model)(x);
  double eager_us = median_us([&] { (*model)(x); });

  auto fast = zc::compile(model);
  auto start = std::chrono::steady_clock::now();
  zc::Tensor y = fast(x);  // capture + compile (or load from the cache) + run
  double first_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  double compiled_us = median_us([&] { fast(x); });

  zc::compiler::Stats s = zc::compiler::stats();
  std::printf("output %s, max |compiled - eager| %.2g\n", zc::shape_str(y.shape()).c_str(),
              zc::max(zc::abs(y - eager)).item<double>());
  std::printf("first compiled call  %8.1f ms  (%s; capture %.1f ms, compile %.1f ms)\n", first_ms,
              s.compiler_invocations ? "compiled" : "loaded from the cache", s.capture_ms,
              s.compile_ms);
  std::printf("eager                %8.1f us per call\n", eager_us);
  std::printf("compiled             %8.1f us per call (%.1fx faster)\n", compiled_us,
              eager_us / compiled_us);
  return 0;
}
