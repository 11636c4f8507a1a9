// The regional-compilation recipe's model, run eagerly: one Linear(10, 10) followed by 64
// identical layers of Linear -> ReLU -> sigmoid -> Linear -> ReLU.
#include <zc/zc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  zc::manual_seed(0);  // same weights and input on every run and every machine
  auto model = zc::models::seed_model(64);
  model->eval();

  zc::Tensor x = zc::randn({10, 10});
  zc::Tensor y = (*model)(x);
  std::printf("output shape %s, checksum (sum) %.6f\n", zc::shape_str(y.shape()).c_str(),
              zc::sum(y).item<double>());

  // The median is robust to the odd slow call (page faults, another process on the core).
  std::vector<double> micros;
  for (int i = 0; i < 200; ++i) {
    auto start = std::chrono::steady_clock::now();
    zc::Tensor out = (*model)(x);
    auto stop = std::chrono::steady_clock::now();
    micros.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::nth_element(micros.begin(), micros.begin() + micros.size() / 2, micros.end());
  std::printf("eager: %.1f us per call (median of %zu)\n", micros[micros.size() / 2],
              micros.size());
  return 0;
}
