#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "models/rope.h"
#include "nn/kv_cache.h"
#include "tensor/assign.h"
#include "zc/autograd.h"
#include "zc/factories.h"
#include "zc/llama.h"
#include "zc/ops.h"

namespace zc::models {

namespace {

[[noreturn]] void config_error(const std::string& what) {
  throw Error("zc::models::LlamaConfig: " + what);
}

void check_positive(const char* field, int64_t value) {
  if (value <= 0) {
    config_error(std::string(field) + " must be positive, got " + std::to_string(value));
  }
}

void check_positive_real(const char* field, double value) {
  if (!(value > 0) || !std::isfinite(value)) {
    config_error(std::string(field) + " must be positive and finite, got " + std::to_string(value));
  }
}

void check_ids(const char* who, const Tensor& ids, int64_t max_positions) {
  if (ids.dim() != 2 || !is_integral(ids.dtype())) {
    throw Error(std::string(who) + ": expected integer token ids of shape [B, T], got " +
                std::string(dtype_name(ids.dtype())) + " " + shape_str(ids.shape()));
  }
  if (ids.size(1) > max_positions) {
    throw Error(std::string(who) + ": sequence length " + std::to_string(ids.size(1)) +
                " exceeds max_position_embeddings " + std::to_string(max_positions));
  }
}

}  // namespace

const char* rope_type_name(RopeScaling::Type type) {
  switch (type) {
    case RopeScaling::Type::none:
      return "default";
    case RopeScaling::Type::linear:
      return "linear";
    case RopeScaling::Type::dynamic:
      return "dynamic";
    case RopeScaling::Type::llama3:
      return "llama3";
  }
  return "?";
}

LlamaConfig LlamaConfig::resolved() const {
  LlamaConfig c = *this;
  check_positive("vocab_size", c.vocab_size);
  check_positive("hidden_size", c.hidden_size);
  check_positive("intermediate_size", c.intermediate_size);
  check_positive("num_attention_heads", c.num_attention_heads);
  check_positive("max_position_embeddings", c.max_position_embeddings);
  if (c.num_hidden_layers < 0) {
    config_error("num_hidden_layers must be non-negative, got " +
                 std::to_string(c.num_hidden_layers));
  }
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  check_positive("num_key_value_heads", c.num_key_value_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    config_error("num_attention_heads " + std::to_string(c.num_attention_heads) +
                 " is not a multiple of num_key_value_heads " +
                 std::to_string(c.num_key_value_heads) +
                 " (each key-value head serves a whole group of query heads)");
  }
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0) {
      config_error("hidden_size " + std::to_string(c.hidden_size) +
                   " is not divisible by num_attention_heads " +
                   std::to_string(c.num_attention_heads) + " (or set head_dim)");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  check_positive("head_dim", c.head_dim);
  if (c.head_dim % 2 != 0) {
    config_error("head_dim must be even (RoPE rotates pairs of elements), got " +
                 std::to_string(c.head_dim));
  }
  if (!(c.rms_norm_eps >= 0) || !std::isfinite(c.rms_norm_eps)) {
    config_error("rms_norm_eps must be finite and non-negative, got " +
                 std::to_string(c.rms_norm_eps));
  }
  check_positive_real("rope_theta", c.rope_theta);
  RopeScaling& s = c.rope_scaling;
  if (s.type != RopeScaling::Type::none) check_positive_real("rope_scaling.factor", s.factor);
  if (s.type == RopeScaling::Type::llama3) {
    if (s.original_max_position_embeddings == 0) {
      s.original_max_position_embeddings = c.max_position_embeddings;
    }
    check_positive("rope_scaling.original_max_position_embeddings",
                   s.original_max_position_embeddings);
    check_positive_real("rope_scaling.low_freq_factor", s.low_freq_factor);
    check_positive_real("rope_scaling.high_freq_factor", s.high_freq_factor);
    if (!(s.low_freq_factor < s.high_freq_factor)) {
      config_error("rope_scaling.low_freq_factor " + std::to_string(s.low_freq_factor) +
                   " must be below high_freq_factor " + std::to_string(s.high_freq_factor));
    }
  }
  return c;
}

LlamaRMSNorm::LlamaRMSNorm(int64_t hidden_size, double eps) : eps(eps) {
  weight = register_parameter("weight", ones({hidden_size}));
}

Tensor LlamaRMSNorm::forward(const Tensor& x) {
  // In f32 whatever the model's dtype: a bf16 mean of squares loses the small components.
  const Tensor h = x.to(DType::f32);
  const Tensor variance = mean(h * h, {-1}, /*keepdim=*/true);
  return weight * (h * rsqrt(variance + eps)).to(x.dtype());
}

LlamaRotaryEmbedding::LlamaRotaryEmbedding(const LlamaConfig& config) {
  RopeTables t = rope_tables(rope_inverse_frequencies(config), config.max_position_embeddings);
  cos = register_buffer("cos", t.cos);
  sin = register_buffer("sin", t.sin);
}

std::vector<Tensor> LlamaRotaryEmbedding::tables_at(const Tensor& positions) const {
  return {embedding(cos, positions), embedding(sin, positions)};
}

std::vector<Tensor> LlamaRotaryEmbedding::tables(int64_t seq) const {
  // Views of the buffers, as GPT's positions are of its table: the traced graph holds no
  // constant whose values change with the length.
  return {cos.slice(0, 0, seq), sin.slice(0, 0, seq)};
}

Tensor apply_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  // transformers' x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), with the head dim split
  // into its halves [.., 2, D/2]: out = x * cos + rot * sin, rot = [-x2, x1] selected from the
  // halves broadcast (views). Every op is elementwise over one shape, so a compiled graph
  // computes it in one kernel (a concatenation of the halves was two more). One op per
  // statement: the recorded order is part of the graph hash.
  const int64_t half = x.size(-1) / 2;
  Shape split = x.shape();
  split.back() = 2;
  split.push_back(half);
  const Tensor xr = x.reshape(split);
  // The halves broadcast to the whole shape before any op, so that no op works on a smaller
  // shape (which a GPU would compute in a kernel of its own).
  const Tensor x1 = xr.narrow(-2, 0, 1).expand(split);
  const Tensor x2 = xr.narrow(-2, 1, 1).expand(split);
  // On x's device, traced too: a constant of the graph is made where it is used.
  const Tensor first = from_values<bool>({true, false}, {2, 1}).to(x.device());
  const Tensor neg_x2 = -x2;
  const Tensor rot = where(first, neg_x2, x1);
  const Tensor c = cos.unsqueeze(-2);
  const Tensor sn = sin.unsqueeze(-2);
  const Tensor x_cos = xr * c;
  const Tensor rot_sin = rot * sn;
  return (x_cos + rot_sin).reshape(x.shape());
}

LlamaAttention::LlamaAttention(const LlamaConfig& config, nn::Init init)
    : num_heads(config.num_attention_heads),
      num_key_value_heads(config.num_key_value_heads),
      head_dim(config.head_dim) {
  const int64_t hidden = config.hidden_size;
  const bool bias = config.attention_bias;
  const int64_t q_width = num_heads * head_dim, kv_width = num_key_value_heads * head_dim;
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(hidden, q_width, bias, init));
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(hidden, kv_width, bias, init));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(hidden, kv_width, bias, init));
  o_proj = register_module("o_proj", std::make_shared<nn::Linear>(q_width, hidden, bias, init));
}

void LlamaAttention::allocate_cache(int64_t batch, int64_t max_length) {
  nn::allocate_kv_cache(*this, k_cache, v_cache, {batch, num_key_value_heads, max_length, head_dim},
                        k_proj->dtype(), k_proj->weight.device());
}

std::vector<Tensor> LlamaAttention::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() < 3 || inputs.size() > 5) {
    throw Error(
        "zc::models::LlamaAttention: expected {x, cos, sin} or {x, cos, sin, positions[, "
        "key_mask]}, got " +
        std::to_string(inputs.size()) + " tensors");
  }
  const bool cached = inputs.size() >= 4;
  if (cached && !k_cache.defined()) {
    throw Error(
        "zc::models::LlamaAttention: a step at given positions needs the KV cache: call "
        "allocate_cache(batch, max_length) on the model first");
  }
  if (cached && inputs[0].size(0) != k_cache.size(0)) {
    throw Error("zc::models::LlamaAttention: the KV cache holds " +
                std::to_string(k_cache.size(0)) + " sequences, the step has " +
                std::to_string(inputs[0].size(0)) + " (allocate_cache with that batch)");
  }
  const Tensor& x = inputs[0];
  const int64_t batch = x.size(0), seq = x.size(1);
  auto heads = [&](const Tensor& t, int64_t n) {
    return t.reshape({batch, seq, n, head_dim}).transpose(1, 2);
  };
  // One statement each: the order of recorded ops is part of the graph hash, and C++ leaves
  // the order of evaluating arguments open.
  Tensor q = heads((*q_proj)(x), num_heads);
  Tensor k = heads((*k_proj)(x), num_key_value_heads);
  Tensor v = heads((*v_proj)(x), num_key_value_heads);
  q = apply_rotary(q, inputs[1], inputs[2]);
  k = apply_rotary(k, inputs[1], inputs[2]);
  if (cached) {
    // The step's keys and values into the cache (an update of a registered buffer: a compiled
    // graph applies it once per call), then attention over the cache.
    index_copy_(k_cache, 2, inputs[3], k);
    index_copy_(v_cache, 2, inputs[3], v);
    // The positions each query sees: given (the model computes them once for its layers), or
    // from the positions alone.
    const Tensor y = inputs.size() == 5
                         ? nn::cached_attention(q, k_cache, v_cache, inputs[4])
                         : nn::cached_attention(q, k_cache, v_cache, inputs[3], Tensor());
    return {(*o_proj)(y.transpose(1, 2).reshape({batch, seq, num_heads * head_dim}))};
  }
  if (num_key_value_heads != num_heads) {
    // Grouped-query attention by repeating each key-value head for the query heads of its group
    // (a copy, as transformers' eager path makes). Attention that reads the shared heads in
    // place belongs with the KV cache, where the copy would be of the whole cache every step.
    const int64_t group = num_heads / num_key_value_heads;
    auto repeat = [&](const Tensor& t) {
      return t.unsqueeze(2)
          .expand({batch, num_key_value_heads, group, seq, head_dim})
          .reshape({batch, num_heads, seq, head_dim});
    };
    k = repeat(k);
    v = repeat(v);
  }
  Tensor y = scaled_dot_product_attention(q, k, v, /*is_causal=*/true);
  return {(*o_proj)(y.transpose(1, 2).reshape({batch, seq, num_heads * head_dim}))};
}

LlamaMLP::LlamaMLP(const LlamaConfig& config, nn::Init init) {
  const int64_t hidden = config.hidden_size, inner = config.intermediate_size;
  const bool bias = config.mlp_bias;
  gate_proj = register_module("gate_proj", std::make_shared<nn::Linear>(hidden, inner, bias, init));
  up_proj = register_module("up_proj", std::make_shared<nn::Linear>(hidden, inner, bias, init));
  down_proj = register_module("down_proj", std::make_shared<nn::Linear>(inner, hidden, bias, init));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  Tensor gate = (*gate_proj)(x);
  Tensor up = (*up_proj)(x);
  // silu(g) = g * sigmoid(g), transformers' hidden_act "silu".
  return (*down_proj)(gate * sigmoid(gate) * up);
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& config, nn::Init init) {
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(config, init));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(config, init));
  input_layernorm = register_module(
      "input_layernorm", std::make_shared<LlamaRMSNorm>(config.hidden_size, config.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm",
                      std::make_shared<LlamaRMSNorm>(config.hidden_size, config.rms_norm_eps));
}

std::vector<Tensor> LlamaDecoderLayer::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() < 3 || inputs.size() > 5) {
    throw Error(
        "zc::models::LlamaDecoderLayer: expected {x, cos, sin} or {x, cos, sin, "
        "positions[, key_mask]}, got " +
        std::to_string(inputs.size()) + " tensors");
  }
  const Tensor& x = inputs[0];
  std::vector<Tensor> attn_inputs(inputs);
  attn_inputs[0] = (*input_layernorm)(x);
  Tensor h = x + (*self_attn)(attn_inputs)[0];
  return {h + (*mlp)((*post_attention_layernorm)(h))};
}

LlamaModel::LlamaModel(const LlamaConfig& config_in, nn::Init init) : config(config_in.resolved()) {
  embed_tokens = register_module(
      "embed_tokens", std::make_shared<nn::Embedding>(config.vocab_size, config.hidden_size, init));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    layers->push_back(std::make_shared<LlamaDecoderLayer>(config, init));
  }
  norm = register_module("norm",
                         std::make_shared<LlamaRMSNorm>(config.hidden_size, config.rms_norm_eps));
  rotary_emb = register_module("rotary_emb", std::make_shared<LlamaRotaryEmbedding>(config));
  // transformers' initializer_range: unit-variance embeddings would start a tied head's logits
  // at a scale of sqrt(hidden_size).
  if (init == nn::Init::random) {
    NoGradGuard no_grad;
    assign_values(embed_tokens->weight, embed_tokens->weight * 0.02);
  }
}

Tensor LlamaModel::forward(const Tensor& ids) {
  check_ids("zc::models::LlamaModel", ids, config.max_position_embeddings);
  const std::vector<Tensor> rope = rotary_emb->tables(ids.size(1));
  Tensor h = (*embed_tokens)(ids);
  for (const auto& layer : *layers) h = (*layer)({h, rope[0], rope[1]})[0];
  return (*norm)(h);
}

std::vector<Tensor> LlamaModel::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  if (inputs.size() != 2 && inputs.size() != 3) {
    throw Error(
        "zc::models::LlamaModel: expected {ids}, {ids, positions} or {ids, positions, "
        "attention_mask}, got " +
        std::to_string(inputs.size()) + " tensors");
  }
  const Tensor &ids = inputs[0], &positions = inputs[1];
  check_ids("zc::models::LlamaModel", ids, config.max_position_embeddings);
  if (positions.dim() != 1 || positions.size(0) != ids.size(1) || !is_integral(positions.dtype())) {
    throw Error("zc::models::LlamaModel: expected integer positions [" +
                std::to_string(ids.size(1)) + "] for ids " + shape_str(ids.shape()) + ", got " +
                std::string(dtype_name(positions.dtype())) + " " + shape_str(positions.shape()));
  }
  Tensor h = (*embed_tokens)(ids);
  // The cache positions each query sees, once for every layer (a kernel less per layer).
  const Tensor mask = inputs.size() == 3 ? inputs[2] : Tensor();
  if (layers->size() == 0) return {(*norm)(h)};
  const Tensor& cache =
      std::static_pointer_cast<LlamaDecoderLayer>((*layers)[0])->self_attn->k_cache;
  if (!cache.defined()) {
    throw Error(
        "zc::models::LlamaModel: a step at given positions needs the KV cache: call "
        "allocate_cache(batch, max_length) on the model first");
  }
  const Tensor visible = nn::cached_attention_mask(positions, mask, cache.size(2));
  std::vector<Tensor> rope;
  if (!mask.defined()) {
    rope = rotary_emb->tables_at(positions);
  } else {
    // Left padding: each token is rotated by its position in its own sequence.
    const Tensor rotation = nn::positions_in_sequence(positions, mask);  // [B, T]
    rope = rotary_emb->tables_at(rotation);                              // [B, T, D/2]
    rope[0] = rope[0].unsqueeze(1);
    rope[1] = rope[1].unsqueeze(1);
  }
  for (const auto& layer : *layers) h = (*layer)({h, rope[0], rope[1], positions, visible})[0];
  return {(*norm)(h)};
}

Llama::Llama(const LlamaConfig& config_in, nn::Init init) : config(config_in.resolved()) {
  model = register_module("model", std::make_shared<LlamaModel>(config, init));
  if (!config.tie_word_embeddings) {
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(
                                             config.hidden_size, config.vocab_size, false, init));
  }
}

Tensor Llama::head(const Tensor& h) {
  return lm_head ? (*lm_head)(h) : linear(h, model->embed_tokens->weight);
}

Tensor Llama::forward(const Tensor& ids) {
  check_ids("zc::models::Llama", ids, config.max_position_embeddings);
  return head((*model)(ids));
}

std::vector<Tensor> Llama::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  if (inputs.size() != 2 && inputs.size() != 3) {
    throw Error(
        "zc::models::Llama: expected {ids}, {ids, positions} or {ids, positions, "
        "attention_mask}, got " +
        std::to_string(inputs.size()) + " tensors");
  }
  if (cache_length_ == 0) {
    throw Error(
        "zc::models::Llama: a step at given positions needs the KV cache: call "
        "allocate_cache(batch, max_length) first");
  }
  nn::check_cached_step("zc::models::Llama", inputs[0], inputs[1],
                        inputs.size() == 3 ? &inputs[2] : nullptr, cache_length_);
  return {head((*model)(inputs)[0])};
}

void Llama::allocate_cache(int64_t batch, int64_t max_length) {
  if (batch <= 0 || max_length <= 0) {
    throw Error("zc::models::Llama::allocate_cache: expected a positive batch and length, got " +
                std::to_string(batch) + " and " + std::to_string(max_length));
  }
  if (max_length > config.max_position_embeddings) {
    throw Error("zc::models::Llama::allocate_cache: " + std::to_string(max_length) +
                " positions exceed max_position_embeddings " +
                std::to_string(config.max_position_embeddings));
  }
  for (const auto& layer : *model->layers) {
    std::dynamic_pointer_cast<LlamaDecoderLayer>(layer)->self_attn->allocate_cache(batch,
                                                                                   max_length);
  }
  cache_length_ = max_length;
}

std::shared_ptr<Llama> llama(const LlamaConfig& config) {
  return std::make_shared<Llama>(config);
}

}  // namespace zc::models
