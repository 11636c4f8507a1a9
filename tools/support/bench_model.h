// The models that `zc bench`, the demo and the process tests start, with their inputs, built
// the same way everywhere so their figures and outputs compare.
#pragma once

#include <memory>
#include <string>

#include "zc/zc.h"

namespace zc_support {

struct BenchModel {
  std::shared_ptr<zc::nn::Module> module;
  zc::Tensor input;
};

// "gpt" or "gpt-small": models::gpt_small_config(layers) on gpt_small_tokens(). "gpt-blocks":
// `layers` causal nn::TransformerBlocks of GPT-2 small's width (d_model 768, 12 heads, MLP
// 3072) in a row, without embeddings or LM head, on an f32 input [8, 128, 768]: the shape of
// the transformer in the torch.compile figures ("gpt12" at 12 layers). Anything else: the seed
// model of `layers` layers on a [10, 10] input, each layer wrapped in zc::compiled() when
// `manual` (manual regional compilation). `dropout`: the gpt-blocks' dropout on both residual
// branches (in training mode). Call manual_seed first for fixed weights. The module is in eval
// mode.
inline BenchModel make_bench_model(const std::string& name, int64_t layers, bool manual,
                                   double dropout = 0.0) {
  BenchModel b;
  if (name == "gpt" || name == "gpt-small") {
    b.module = zc::models::gpt(zc::models::gpt_small_config(layers));
    b.input = zc::models::gpt_small_tokens();
  } else if (name == "gpt-blocks") {
    auto blocks = std::make_shared<zc::nn::Sequential>();
    for (int64_t i = 0; i < layers; ++i)
      blocks->push_back(std::make_shared<zc::nn::TransformerBlock>(768, 12, /*causal=*/true,
                                                                   /*mlp_ratio=*/4, dropout));
    b.module = blocks;
    b.input = zc::randn({8, 128, 768});
  } else if (manual) {
    b.module = std::make_shared<zc::models::SeedModel>(
        layers, 10, [](std::shared_ptr<zc::nn::Module> l) { return zc::compiled(l); });
    b.input = zc::randn({10, 10});
  } else {
    b.module = zc::models::seed_model(layers);
    b.input = zc::randn({10, 10});
  }
  b.module->eval();
  return b;
}

}  // namespace zc_support
