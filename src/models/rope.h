// Rotary position embeddings' frequencies and tables, as transformers computes them for the
// rope types Llama uses. Pure functions of a resolved LlamaConfig.
#pragma once

#include <cstdint>
#include <vector>

#include "zc/llama.h"
#include "zc/tensor.h"

namespace zc::models {

// The head_dim / 2 inverse frequencies theta^(-2i / head_dim), rescaled by config.rope_scaling,
// rounded to f32 as transformers keeps them.
std::vector<float> rope_inverse_frequencies(const LlamaConfig& config);

struct RopeTables {
  Tensor cos, sin;  // f32 [positions, inverse_frequencies.size()]
};

// cos and sin of position * frequency for positions 0..positions-1; the angle is the f32
// product transformers forms, its cosine and sine rounded once to f32.
RopeTables rope_tables(const std::vector<float>& inverse_frequencies, int64_t positions);

}  // namespace zc::models
