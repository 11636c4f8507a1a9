// Tensor factories and the seeded random number generator.
#pragma once

#include <cstdint>
#include <vector>

#include "zc/tensor.h"

namespace zc {

// Reseeds the process-wide generator: the same seed gives the same randn/rand/randint
// sequence on every machine.
void manual_seed(uint64_t seed);
// The process generator's state, as i64 words (torch.get_rng_state's role), and its restore:
// draws after set_rng_state(s) repeat those after rng_state() returned s. A tensor that is not
// such a state is a zc::Error, and the generator is left as it was.
Tensor rng_state();
void set_rng_state(const Tensor& state);

Tensor zeros(const Shape& shape, DType dtype = DType::f32);
// Zeros made on `device` itself: no host buffer, no copy (on a GPU, a memset queued with the
// device's later work).
Tensor zeros(const Shape& shape, DType dtype, Device device);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor arange(int64_t end, DType dtype = DType::i64);
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
Tensor randn(const Shape& shape, DType dtype = DType::f32);  // standard normal
Tensor rand(const Shape& shape, DType dtype = DType::f32);   // uniform [0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::i64);
// Uniform [0, 1) values of x's shape, floating dtype and device (x's values are not read): a
// counter-based draw (Philox4x32-10, 24 random bits a value) under a seed taken from the
// process generator, so manual_seed reproduces it. Inside a compiled forward() it is an op of
// the graph whose seed every call draws anew, where rand/randn/randint are refused (they would
// be constants of the graph); nn::Dropout draws its mask with it.
Tensor rand_like(const Tensor& x);
// Standard normal values of x's shape, floating dtype and device, drawn as rand_like's are
// (Box-Muller over two words of each element's Philox block), compiled in forward() alike.
Tensor randn_like(const Tensor& x);
Tensor scalar_tensor(double value, DType dtype = DType::f32);  // 0-dim
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
// Any element type with a DType (double, int64_t, int32_t, bool, Half, BFloat16).
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape);

}  // namespace zc
