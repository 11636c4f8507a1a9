// The Llama family of decoder-only language models (RMSNorm, rotary position embeddings,
// SwiGLU MLPs, grouped-query attention), computed as transformers' LlamaForCausalLM computes
// them and laid out under the same names (model.embed_tokens.weight,
// model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight), so that a
// transformers checkpoint loads by name (from_pretrained in zc/models.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zc/causal_lm.h"
#include "zc/nn.h"

namespace zc::models {

// How RoPE's frequencies are rescaled, as transformers' rope_type: none ("default"), "linear"
// (every frequency divided by factor), "dynamic" (NTK: the base grows only for sequences
// longer than max_position_embeddings, which forward() refuses, so here it computes as none),
// "llama3" (Llama 3.1's: low frequencies divided by factor, high ones kept, the band between
// interpolated).
struct RopeScaling {
  enum class Type : uint8_t { none, linear, dynamic, llama3 };
  Type type = Type::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;                  // llama3
  double high_freq_factor = 4.0;                 // llama3
  int64_t original_max_position_embeddings = 0;  // llama3; 0 means max_position_embeddings
};
const char* rope_type_name(RopeScaling::Type type);  // transformers' spelling: "default", ...

// transformers' LlamaConfig fields, with its defaults (Llama 2 7B's shape).
struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 0;  // 0 means num_attention_heads (no grouping)
  int64_t head_dim = 0;             // 0 means hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 2048;  // also the longest sequence forward() takes
  bool tie_word_embeddings = false;        // the LM head reuses embed_tokens.weight
  bool attention_bias = false;             // biases on q, k, v and o projections
  bool mlp_bias = false;                   // biases on gate, up and down projections

  // The zeros above resolved; raises zc::Error naming the field for an inconsistent config
  // (heads not dividing, a non-positive size, an odd head_dim, a llama3 band upside down).
  LlamaConfig resolved() const;
};

// x / sqrt(mean(x^2) + eps) * weight over the last dim, in f32 whatever x's dtype, cast back
// to it before the weight multiplies (transformers' LlamaRMSNorm, not torch.nn.RMSNorm).
class LlamaRMSNorm : public nn::Module {
 public:
  explicit LlamaRMSNorm(int64_t hidden_size, double eps = 1e-6);
  Tensor forward(const Tensor& x) override;
  Tensor weight;
  double eps;
};

// The rotary tables: cos and sin of position * inverse frequency for positions
// 0..max_position_embeddings-1, [max_position_embeddings, head_dim / 2] each. They are buffers
// (they follow to(dtype) and to(device), and a compiled graph takes them as inputs), computed
// from the config: a checkpoint holds none.
class LlamaRotaryEmbedding : public nn::Module {
 public:
  explicit LlamaRotaryEmbedding(const LlamaConfig& config);
  // The first `seq` rows of each table (views), for positions 0..seq-1.
  std::vector<Tensor> tables(int64_t seq) const;
  // The rows of `positions` [T] (an integer tensor on the tables' device), gathered.
  std::vector<Tensor> tables_at(const Tensor& positions) const;
  Tensor cos, sin;
};

// Applies the rotation of `cos`/`sin` [T, head_dim / 2] to x [B, H, T, head_dim] as
// transformers' rotate_half does: element i pairs with element i + head_dim / 2.
Tensor apply_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin);

// Causal self-attention with num_key_value_heads key/value heads shared by groups of query
// heads. forward({x [B, T, hidden], cos, sin}) returns {[B, T, hidden]}; with the cache
// allocated, forward({x, cos, sin, positions [T]}) (cos and sin of those positions) writes the
// step's keys and values at `positions` and attends to the cache up to each query's position;
// forward({x, cos, sin, positions, visible}) attends where `visible` says
// (nn::cached_attention_mask: LlamaModel computes it once for its layers).
class LlamaAttention : public nn::Module {
 public:
  explicit LlamaAttention(const LlamaConfig& config, nn::Init init = nn::Init::random);
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  // k_cache and v_cache [batch, num_key_value_heads, max_length, head_dim], in k_proj's dtype
  // and on its device; registered buffers from the first allocation on.
  void allocate_cache(int64_t batch, int64_t max_length);
  std::shared_ptr<nn::Linear> q_proj, k_proj, v_proj, o_proj;
  int64_t num_heads, num_key_value_heads, head_dim;
  Tensor k_cache, v_cache;  // undefined until allocate_cache
};

// down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public nn::Module {
 public:
  explicit LlamaMLP(const LlamaConfig& config, nn::Init init = nn::Init::random);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Linear> gate_proj, up_proj, down_proj;
};

// Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x)). forward({x, cos, sin}) -> {x};
// forward({x, cos, sin, positions}) runs the attention with its cache.
class LlamaDecoderLayer : public nn::Module {
 public:
  explicit LlamaDecoderLayer(const LlamaConfig& config, nn::Init init = nn::Init::random);
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMLP> mlp;
  std::shared_ptr<LlamaRMSNorm> input_layernorm, post_attention_layernorm;
};

// The decoder without its head: forward(ids [B, T]) returns the final normed hidden states
// [B, T, hidden_size]; forward({ids, positions}) is the step with the layers' caches.
class LlamaModel : public nn::Module {
 public:
  explicit LlamaModel(const LlamaConfig& config, nn::Init init = nn::Init::random);
  Tensor forward(const Tensor& ids) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  LlamaConfig config;  // resolved
  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<LlamaRMSNorm> norm;
  std::shared_ptr<LlamaRotaryEmbedding> rotary_emb;
};

// LlamaForCausalLM: the decoder and its LM head; with tie_word_embeddings there is no
// lm_head module and the head multiplies by model.embed_tokens.weight. `init` is the
// projections' and the embedding's (nn::Init); the norms start at one.
class Llama : public CausalLM {
 public:
  explicit Llama(const LlamaConfig& config, nn::Init init = nn::Init::random);
  using CausalLM::forward;
  Tensor forward(const Tensor& ids) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  int64_t vocab_size() const override { return config.vocab_size; }
  int64_t max_sequence_length() const override { return config.max_position_embeddings; }
  void allocate_cache(int64_t batch, int64_t max_length) override;
  int64_t cache_length() const override { return cache_length_; }
  LlamaConfig config;  // resolved
  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<nn::Linear> lm_head;  // null when tied

 private:
  Tensor head(const Tensor& h);
  int64_t cache_length_ = 0;
};

// A Llama with weights initialized as zc's layers are (random); from_pretrained loads real ones.
std::shared_ptr<Llama> llama(const LlamaConfig& config);

}  // namespace zc::models
