// Built against an installed zc: computes relu(a @ b) and checks it against known values.
#include <zc/zc.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

int main() {
  try {
    zc::Tensor a = zc::from_vector({1, -2, 3, 4}, {2, 2});
    zc::Tensor b = zc::from_vector({1, 0, 0, -1}, {2, 2});
    zc::Tensor y = zc::relu(zc::matmul(a, b)).contiguous();
    const std::vector<float> expected = {1, 2, 3, 0};
    if (y.shape() != zc::Shape{2, 2}) {
      std::fprintf(stderr, "wrong shape %s\n", zc::shape_str(y.shape()).c_str());
      return 1;
    }
    const float* v = y.data<float>();
    for (size_t i = 0; i < expected.size(); ++i) {
      if (std::fabs(v[i] - expected[i]) > 1e-6f) {
        std::fprintf(stderr, "element %zu: got %g, expected %g\n", i, v[i], expected[i]);
        return 1;
      }
    }
    std::printf("zc %s (build %s): relu(a @ b) ok\n", zc::version().c_str(),
                zc::build_id().substr(0, 12).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
