#include <memory>
#include <string>
#include <vector>

#include "zc/nn.h"
#include "zc/ops.h"

namespace zc::nn {

MultiheadAttention::MultiheadAttention(int64_t d_model, int64_t num_heads, bool causal, bool bias,
                                       Init init)
    : d_model(d_model), num_heads(num_heads), causal(causal) {
  if (d_model <= 0 || num_heads <= 0) {
    throw Error("zc::nn::MultiheadAttention: d_model and num_heads must be positive, got d_model " +
                std::to_string(d_model) + ", num_heads " + std::to_string(num_heads));
  }
  if (d_model % num_heads != 0) {
    throw Error("zc::nn::MultiheadAttention: d_model " + std::to_string(d_model) +
                " is not divisible by num_heads " + std::to_string(num_heads));
  }
  in_proj = register_module("in_proj", std::make_shared<Linear>(d_model, 3 * d_model, bias, init));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, bias, init));
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(-1) != d_model) {
    throw Error("zc::nn::MultiheadAttention: expected x of shape [B, T, " +
                std::to_string(d_model) + "], got " + shape_str(x.shape()));
  }
  const int64_t batch = x.size(0), seq = x.size(1), head_dim = d_model / num_heads;
  std::vector<Tensor> qkv = split((*in_proj)(x), d_model, -1);
  // [B, T, d] -> [B, H, T, head_dim]: attention runs per head over the last two dims.
  auto heads = [&](const Tensor& t) {
    return t.reshape({batch, seq, num_heads, head_dim}).transpose(1, 2);
  };
  // One statement each: argument evaluation order is unspecified in C++, and the order of the
  // recorded ops is part of the graph hash, which must not depend on the compiler.
  Tensor q = heads(qkv[0]);
  Tensor k = heads(qkv[1]);
  Tensor v = heads(qkv[2]);
  Tensor y = scaled_dot_product_attention(q, k, v, causal);
  return (*out_proj)(y.transpose(1, 2).reshape({batch, seq, d_model}));
}

TransformerBlock::TransformerBlock(int64_t d_model, int64_t num_heads, bool causal,
                                   int64_t mlp_ratio, double dropout, double layer_norm_eps,
                                   Init init)
    : dropout_p(dropout) {
  if (d_model <= 0 || mlp_ratio <= 0) {
    throw Error("zc::nn::TransformerBlock: d_model and mlp_ratio must be positive, got d_model " +
                std::to_string(d_model) + ", mlp_ratio " + std::to_string(mlp_ratio));
  }
  if (!(dropout >= 0 && dropout < 1)) {
    throw Error("zc::nn::TransformerBlock: dropout must be in [0, 1), got " +
                std::to_string(dropout));
  }
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  attn = register_module(
      "attn", std::make_shared<MultiheadAttention>(d_model, num_heads, causal, true, init));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  fc = register_module("fc", std::make_shared<Linear>(d_model, mlp_ratio * d_model, true, init));
  proj =
      register_module("proj", std::make_shared<Linear>(mlp_ratio * d_model, d_model, true, init));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  // Functional dropout, not a Dropout member: a block without it records the graph it always
  // did (a module call would add a region, and with it a new graph hash).
  const bool drop = dropout_p > 0 && is_training();
  auto branch = [&](const Tensor& b) { return drop ? zc::dropout(b, dropout_p) : b; };
  Tensor h = x + branch((*attn)((*ln1)(x)));
  return h + branch((*proj)(gelu((*fc)((*ln2)(h)), GeluApprox::tanh)));
}

}  // namespace zc::nn
