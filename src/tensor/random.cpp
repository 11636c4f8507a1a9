#include "tensor/random.h"

#include <cmath>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "zc/error.h"
#include "zc/factories.h"

namespace zc {

namespace {
struct Generator {
  std::mutex mu;
  std::mt19937_64 engine{0x5eed};
};
Generator& generator() {
  static Generator g;
  return g;
}
double to_unit(uint64_t x) {
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}
}  // namespace

void manual_seed(uint64_t seed) {
  Generator& g = generator();
  std::lock_guard lock(g.mu);
  g.engine.seed(seed);
}

// The engine's textual state (the standard's operator<<: its 312 words and its position),
// as words.
Tensor rng_state() {
  Generator& g = generator();
  std::ostringstream text;
  {
    std::lock_guard lock(g.mu);
    text << g.engine;
  }
  std::istringstream in(text.str());
  std::vector<int64_t> words;
  for (uint64_t w; in >> w;) words.push_back(static_cast<int64_t>(w));
  return from_values(words, {static_cast<int64_t>(words.size())});
}

void set_rng_state(const Tensor& state) {
  constexpr int64_t kWords = std::mt19937_64::state_size + 1;
  if (!state.defined() || state.dtype() != DType::i64 || state.shape() != Shape{kWords}) {
    throw Error("zc::set_rng_state: expected the i64 [" + std::to_string(kWords) +
                "] tensor rng_state() returns, got " +
                (state.defined()
                     ? std::string(dtype_name(state.dtype())) + " " + shape_str(state.shape())
                     : std::string("an undefined tensor")));
  }
  const Tensor c = state.to(Device::cpu()).contiguous();
  std::ostringstream text;
  for (int64_t i = 0; i < kWords; ++i)
    text << (i ? " " : "") << static_cast<uint64_t>(c.data<int64_t>()[i]);
  std::mt19937_64 engine;
  std::istringstream in(text.str());
  in >> engine;
  if (!in && !in.eof()) throw Error("zc::set_rng_state: the words are not a generator state");
  Generator& g = generator();
  std::lock_guard lock(g.mu);
  g.engine = engine;
}

void random_uniform(double* out, int64_t n) {
  Generator& g = generator();
  std::lock_guard lock(g.mu);
  for (int64_t i = 0; i < n; ++i) out[i] = to_unit(g.engine());
}

void random_normal(double* out, int64_t n) {
  Generator& g = generator();
  std::lock_guard lock(g.mu);
  // Box-Muller, two values per pair of uniforms.
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = 1.0 - to_unit(g.engine());  // (0, 1]: log stays finite
    double u2 = to_unit(g.engine());
    double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = r * std::cos(2.0 * M_PI * u2);
    if (i + 1 < n) out[i + 1] = r * std::sin(2.0 * M_PI * u2);
  }
}

void random_integers(int64_t* out, int64_t n, int64_t low, int64_t high) {
  Generator& g = generator();
  std::lock_guard lock(g.mu);
  uint64_t range = static_cast<uint64_t>(high - low);
  // Rejection keeps the distribution exactly uniform.
  uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t x;
    do x = g.engine();
    while (x >= limit);
    out[i] = low + static_cast<int64_t>(x % range);
  }
}

void random_seeds(int64_t* out, int64_t n) {
  Generator& g = generator();
  std::lock_guard lock(g.mu);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(g.engine());
}

}  // namespace zc
