#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "nn/epoch.h"
#include "nn/kv_cache.h"
#include "tensor/assign.h"
#include "zc/factories.h"
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

std::vector<Tensor> MultiheadAttention::project_heads(const Tensor& x) {
  const int64_t batch = x.size(0), seq = x.size(1), head_dim = d_model / num_heads;
  std::vector<Tensor> qkv = split((*in_proj)(x), d_model, -1);
  // [B, T, d] -> [B, H, T, head_dim]: attention runs per head over the last two dims. One
  // statement each: argument evaluation order is unspecified in C++, and the order of the
  // recorded ops is part of the graph hash, which must not depend on the compiler.
  for (Tensor& t : qkv) t = t.reshape({batch, seq, num_heads, head_dim}).transpose(1, 2);
  return qkv;
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(-1) != d_model) {
    throw Error("zc::nn::MultiheadAttention: expected x of shape [B, T, " +
                std::to_string(d_model) + "], got " + shape_str(x.shape()));
  }
  const std::vector<Tensor> qkv = project_heads(x);
  Tensor y = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], causal);
  return (*out_proj)(y.transpose(1, 2).reshape({x.size(0), x.size(1), d_model}));
}

// Attention of queries at `positions` against the cache (keys and values written there
// already): a query at position p sees the cache's positions 0..p, and with `key_mask` [B, L]
// only those its sequence holds (1; 0: left padding). The queries of each group of heads are
// rows of one product with their key-value head, read in place (no repeated keys):
// q [B, H, T, D] -> [B, Hkv, group*T, D]. Hidden scores take the lowest finite float, not -inf:
// a padding query that sees nothing gets a finite (unused) result, so the keys and values it
// writes are finite and weigh exactly 0 where they are hidden.
Tensor cached_attention_mask(const Tensor& positions, const Tensor& key_mask, int64_t length) {
  const int64_t seq = positions.size(0);
  const Tensor keys = arange(length).to(positions.device()).reshape({1, length});
  Tensor seen = le(keys, positions.to(DType::i64).reshape({seq, 1})).reshape({1, 1, seq, length});
  if (key_mask.defined()) {
    const int64_t batch = key_mask.size(0);
    const Tensor held = cast(ne(key_mask.reshape({batch, 1, 1, length}), 0.0), DType::f32);
    seen = gt(cast(seen, DType::f32) * held, 0.5);  // [B, 1, T, L]
  }
  return seen;
}

Tensor cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& positions, const Tensor& key_mask) {
  return cached_attention(q, k_cache, v_cache,
                          cached_attention_mask(positions, key_mask, k_cache.size(2)));
}

Tensor cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& visible) {
  // One attention op, the mask and the grouped heads in it: a fused kernel on the CPU and on
  // CUDA reads each cached head in place for its group's queries.
  return scaled_dot_product_attention(q, k_cache, v_cache, visible, false, std::nullopt, true);
}

void allocate_kv_cache(Module& module, Tensor& k_cache, Tensor& v_cache, const Shape& shape,
                       DType dtype, Device device) {
  if (k_cache.defined() && k_cache.shape() == shape && k_cache.dtype() == dtype &&
      k_cache.device() == device) {
    return;
  }
  const Tensor k = zeros(shape, dtype, device);
  const Tensor v = zeros(shape, dtype, device);
  if (!k_cache.defined()) {
    k_cache = module.register_buffer("k_cache", k);
    v_cache = module.register_buffer("v_cache", v);
    return;
  }
  replace_contents(k_cache, k);
  replace_contents(v_cache, v);
  bump_module_epoch();
}

void check_cached_step(const std::string& who, const Tensor& ids, const Tensor& positions,
                       const Tensor* mask, int64_t cache_length) {
  if (mask && (mask->dim() != 2 || mask->size(0) != ids.size(0) || mask->size(1) != cache_length)) {
    throw Error(who + ": expected an attention mask [" + std::to_string(ids.size(0)) + ", " +
                std::to_string(cache_length) +
                "] (a sequence's cache positions: 1 a token, 0 padding), got " +
                shape_str(mask->shape()));
  }
  if (positions.is_traced() || positions.numel() == 0) return;
  const Tensor p = positions.to(Device::cpu()).to(DType::i64);
  const int64_t lo = amin(p).item<int64_t>(), hi = amax(p).item<int64_t>();
  if (lo < 0 || hi >= cache_length) {
    throw Error(who + ": positions " + std::to_string(lo) + ".." + std::to_string(hi) +
                " are outside the KV cache of " + std::to_string(cache_length) + " positions");
  }
}

Tensor positions_in_sequence(const Tensor& positions, const Tensor& mask) {
  const int64_t batch = mask.size(0), length = mask.size(1);
  const Tensor held = sum(cast(ne(mask, 0.0), DType::f32), {1});  // [B]
  const Tensor pad = (static_cast<double>(length) - held).reshape({batch, 1});
  const Tensor at = cast(positions, DType::f32).reshape({1, -1});
  return cast(maximum(at - pad, 0.0), DType::i64);
}

void MultiheadAttention::allocate_cache(int64_t batch, int64_t max_length) {
  allocate_kv_cache(*this, k_cache, v_cache, {batch, num_heads, max_length, d_model / num_heads},
                    in_proj->dtype(), in_proj->weight.device());
}

std::vector<Tensor> MultiheadAttention::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  if (inputs.size() != 2 && inputs.size() != 3) {
    throw Error(
        "zc::nn::MultiheadAttention: expected {x}, {x, positions} or {x, positions, "
        "key_mask}, got " +
        std::to_string(inputs.size()) + " tensors");
  }
  const Tensor& x = inputs[0];
  if (!k_cache.defined()) {
    throw Error(
        "zc::nn::MultiheadAttention: a step at given positions needs the KV cache: call "
        "allocate_cache(batch, max_length) first");
  }
  if (x.dim() != 3 || x.size(-1) != d_model || x.size(0) != k_cache.size(0)) {
    throw Error("zc::nn::MultiheadAttention: expected x of shape [" +
                std::to_string(k_cache.size(0)) + ", T, " + std::to_string(d_model) +
                "] (the cache's batch), got " + shape_str(x.shape()));
  }
  const std::vector<Tensor> qkv = project_heads(x);
  index_copy_(k_cache, 2, inputs[1], qkv[1]);
  index_copy_(v_cache, 2, inputs[1], qkv[2]);
  const Tensor y = cached_attention(qkv[0], k_cache, v_cache, inputs[1],
                                    inputs.size() == 3 ? inputs[2] : Tensor());
  return {(*out_proj)(y.transpose(1, 2).reshape({x.size(0), x.size(1), d_model}))};
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

std::vector<Tensor> TransformerBlock::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  if (dropout_p > 0 && is_training()) {
    throw Error("zc::nn::TransformerBlock: a step with the KV cache is inference (call eval())");
  }
  std::vector<Tensor> attn_inputs(inputs);
  attn_inputs[0] = (*ln1)(inputs[0]);
  Tensor h = inputs[0] + (*attn)(attn_inputs)[0];
  return {h + (*proj)(gelu((*fc)((*ln2)(h)), GeluApprox::tanh))};
}

}  // namespace zc::nn
