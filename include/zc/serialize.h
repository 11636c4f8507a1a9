// safetensors: the weight format of PyTorch and Hugging Face (an 8-byte little-endian header
// length, a JSON header mapping names to dtype, shape and byte offsets, then raw bytes).
#pragma once

#include <map>
#include <string>

#include "zc/tensor.h"

namespace zc {

// Raises zc::Error naming the file and the problem for a truncated or malformed file.
std::map<std::string, Tensor> read_safetensors(const std::string& path);
void write_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path);

}  // namespace zc
