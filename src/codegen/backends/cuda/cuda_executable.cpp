// TEMPORARY local stub until the CUDA runtime lands.
#include "codegen/backends/cuda/cuda_executable.h"
namespace zc::codegen::cuda {
std::string device_arch(int, std::string* why) {
  *why = "no CUDA driver (stub)";
  return "";
}
std::shared_ptr<const Executable> make_cuda_executable(Schedule, BufferPlan,
                                                       std::span<const uint8_t>) {
  throw Error("no CUDA driver (stub)");
}
}  // namespace zc::codegen::cuda
