// Weight-only int8 quantization of a model's linear layers (nn::Linear::quantize_int8): each
// weight becomes int8 values with one scale per output channel, so a decode step, whose cost is
// reading the weights, reads half the bytes of a bf16 model. Activations stay in the model's
// dtype; a compiled CUDA graph's products read the int8 weight directly (docs/generation.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zc/nn.h"

namespace zc {

struct QuantizeOptions {
  // Dotted names of nn::Linear modules to leave as they are ("lm_head", "model.layers.0.mlp").
  std::vector<std::string> skip;
};

struct QuantizeReport {
  int64_t layers = 0;        // nn::Linear modules quantized
  int64_t bytes_before = 0;  // their weights' bytes before
  int64_t bytes_after = 0;   // and after (the int8 values and the scales)
};

// Quantizes every nn::Linear in `module` (itself included) not named in options.skip and not
// quantized already. A name in skip that names no nn::Linear is a zc::Error (a typo would
// otherwise quantize a layer meant to stay), and so is a layer whose weight is not floating.
QuantizeReport quantize(nn::Module& module, const QuantizeOptions& options = {});

}  // namespace zc
