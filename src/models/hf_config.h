// transformers' config.json to the config of the zc model that computes the same function.
// Input: the text of a config.json as transformers 4 or 5 writes it (both spellings of RoPE:
// rope_theta at the top or in rope_parameters / rope_scaling, "type" or "rope_type").
// Output: which family, and its config; or a zc::Error naming the file, the field and what it
// should be, for malformed JSON, an unknown architecture, a field of the wrong kind, or a
// setting zc's model does not compute (a RoPE type, an activation, GPT-2's cross-attention...).
#pragma once

#include <string>
#include <string_view>

#include "zc/llama.h"
#include "zc/models.h"

namespace zc::models {

struct PretrainedConfig {
  enum class Family : uint8_t { llama, gpt2 };
  Family family = Family::llama;
  std::string architecture;  // as config.json names it ("LlamaForCausalLM"), for messages
  LlamaConfig llama;         // when family == llama
  GPTConfig gpt;             // when family == gpt2
};

// `origin` names the file in messages.
PretrainedConfig parse_pretrained_config(std::string_view text, const std::string& origin);

}  // namespace zc::models
