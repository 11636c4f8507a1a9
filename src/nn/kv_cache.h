// The KV cache buffers of an attention module (nn::MultiheadAttention, models::LlamaAttention):
// what allocate_cache does for both.
#pragma once

#include "zc/nn.h"

namespace zc::nn {

// Makes `k_cache` and `v_cache` zeros of `shape` in `like`'s dtype and on its device: registered
// buffers of `module` ("k_cache", "v_cache") at the first call; kept as they are when they
// already have that shape, dtype and device (a step reads only positions it or an earlier step
// of its generation wrote); otherwise the registered handles keep their identity (compiled
// graphs bind them), take the new contents, and compiled modules see the module changed.
void allocate_kv_cache(Module& module, Tensor& k_cache, Tensor& v_cache, const Shape& shape,
                       const Tensor& like);

}  // namespace zc::nn
