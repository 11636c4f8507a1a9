// Where a tensor lives. Tensors can be allocated on a CUDA device and copied to and from it
// (Tensor::to) when the build has the CUDA backend and the machine a GPU (zc/cuda.h says
// whether); operations on CUDA tensors raise a zc::Error until the CUDA kernels land.
#pragma once

#include <cstdint>
#include <string>

namespace zc {

struct Device {
  enum class Type : uint8_t { cpu, cuda };
  Type type = Type::cpu;
  int index = 0;

  static Device cpu() { return Device{Type::cpu, 0}; }
  static Device cuda(int i = 0) { return Device{Type::cuda, i}; }
  bool is_cpu() const { return type == Type::cpu; }
  bool is_cuda() const { return type == Type::cuda; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace zc
