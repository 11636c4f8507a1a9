#include "zc/causal_lm.h"

#include <string>

namespace zc::models {

void CausalLM::allocate_cache(int64_t, int64_t) {
  throw Error(type_name() +
              ": no KV cache path (decoding with a cache is built for zc::models::Llama)");
}

std::vector<Tensor> CausalLM::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  throw Error(type_name() + ": forward({ids, positions}) runs a step with the KV cache, which " +
              "this model does not have (decoding with a cache is built for zc::models::Llama)");
}

}  // namespace zc::models
