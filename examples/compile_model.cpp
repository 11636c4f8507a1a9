// Compiling your own model: write it with zc::nn modules, wrap it in zc::compile, call it.
#include <zc/zc.h>

#include <cstdio>

// A small MLP block: the pattern a compiler fuses (matmul + bias + activation in one kernel).
struct Mlp : zc::nn::Module {
  std::shared_ptr<zc::nn::Linear> fc1, fc2;
  std::shared_ptr<zc::nn::LayerNorm> norm;
  Mlp(int64_t d, int64_t hidden) {
    fc1 = register_module("fc1", std::make_shared<zc::nn::Linear>(d, hidden));
    fc2 = register_module("fc2", std::make_shared<zc::nn::Linear>(hidden, d));
    norm = register_module("norm", std::make_shared<zc::nn::LayerNorm>(d));
  }
  zc::Tensor forward(const zc::Tensor& x) override {
    return x + (*fc2)(zc::gelu((*fc1)((*norm)(x)), zc::GeluApprox::tanh));
  }
};

int main() {
  zc::NoGradGuard no_grad;  // inference: no gradients recorded
  zc::manual_seed(0);
  auto model = std::make_shared<Mlp>(64, 256);
  model->eval();
  zc::Tensor x = zc::randn({32, 64});

  auto fast = zc::compile(model);  // nothing compiles yet
  zc::Tensor y = fast(x);          // capture, lower, generate C++, compile (or load), run
  zc::Tensor again = fast(x);      // runs the compiled code: no capture, no compile

  std::printf("max |compiled - eager| = %.2g\n", zc::max(zc::abs(y - (*model)(x))).item<double>());
  // A new input shape is a new specialization (a recompile); the old one stays compiled.
  fast(zc::randn({8, 64}));
  std::printf("graphs captured: %lld (one per input shape), recompiles: %lld\n",
              static_cast<long long>(zc::compiler::stats().graphs_captured),
              static_cast<long long>(zc::compiler::stats().recompiles));
  // ZC_LOGS=output_code prints the generated C++; ZC_LOGS=graph the graphs and the schedule.
  return 0;
}
