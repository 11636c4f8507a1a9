// Compiles and runs a small seed model in a fresh process and prints what happened, for tests
// of behaviour that depends on the process environment (compiler discovery, caches).
// Output: "ok <sum of outputs> <max |compiled - eager|>" and the compiler stats as JSON, or
// "error: <message>" with exit code 3.
#include <cmath>
#include <cstdio>
#include <string>

#include "zc/zc.h"

int main(int argc, char** argv) {
  int layers = argc > 1 ? std::stoi(argv[1]) : 4;
  try {
    zc::manual_seed(0);
    auto model = zc::models::seed_model(layers);
    zc::Tensor x = zc::randn({10, 10});
    zc::Tensor ref = (*model)(x);
    zc::Tensor y = zc::compile(model)(x);
    double diff = zc::max(zc::abs(y - ref)).item<double>();
    std::printf("ok %.9g %.3g\n%s\n", zc::sum(y).item<double>(), diff,
                zc::compiler::stats().json().c_str());
    return 0;
  } catch (const zc::Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
}
