// The process-wide random generator behind manual_seed, randn, rand and randint. Sequences
// depend only on the seed (no std:: distributions, whose output differs between standard
// libraries), so a seed reproduces the same tensors on every machine.
#pragma once

#include <cstdint>

namespace zc {

// Fills `out` with n values; each call advances the shared generator atomically.
void random_uniform(double* out, int64_t n);                               // [0, 1)
void random_normal(double* out, int64_t n);                                // N(0, 1)
void random_integers(int64_t* out, int64_t n, int64_t low, int64_t high);  // [low, high)
// n seeds of rand_like's generator (ops/philox.h), 64 raw bits each: what a compiled call
// draws for every rand_like of its graph, in one step of the shared generator.
void random_seeds(int64_t* out, int64_t n);

}  // namespace zc
