#include "models/rope.h"

#include <cmath>
#include <numbers>

namespace zc::models {

std::vector<float> rope_inverse_frequencies(const LlamaConfig& config) {
  const int64_t dim = config.head_dim;
  const RopeScaling& s = config.rope_scaling;
  std::vector<float> out;
  out.reserve(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim; i += 2) {
    // transformers divides in f32 (arange(0, dim, 2).float() / dim) before the power.
    const float exponent = static_cast<float>(i) / static_cast<float>(dim);
    const auto base = static_cast<float>(1.0 / std::pow(config.rope_theta, double{exponent}));
    double f = base;
    switch (s.type) {
      case RopeScaling::Type::none:
      case RopeScaling::Type::dynamic:  // differs from none only past max_position_embeddings
        break;
      case RopeScaling::Type::linear:
        f = base / s.factor;
        break;
      case RopeScaling::Type::llama3: {
        // Wavelengths shorter than context / high_freq_factor keep their frequency, longer than
        // context / low_freq_factor are divided by factor, and the band between blends the two
        // by where the wavelength falls in it.
        const auto context = static_cast<double>(s.original_max_position_embeddings);
        const double low_freq_wavelen = context / s.low_freq_factor;
        const double high_freq_wavelen = context / s.high_freq_factor;
        const double wavelen = 2 * std::numbers::pi / base;
        if (wavelen > low_freq_wavelen) {
          f = base / s.factor;
        } else if (wavelen >= high_freq_wavelen) {
          const double smooth =
              (context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          f = (1 - smooth) * base / s.factor + smooth * base;
        }
        break;
      }
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

RopeTables rope_tables(const std::vector<float>& inverse_frequencies, int64_t positions) {
  const auto half = static_cast<int64_t>(inverse_frequencies.size());
  RopeTables t{Tensor::empty({positions, half}), Tensor::empty({positions, half})};
  float* cos = t.cos.data<float>();
  float* sin = t.sin.data<float>();
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inverse_frequencies[static_cast<size_t>(i)];
      cos[p * half + i] = static_cast<float>(std::cos(double{angle}));
      sin[p * half + i] = static_cast<float>(std::sin(double{angle}));
    }
  }
  return t;
}

}  // namespace zc::models
