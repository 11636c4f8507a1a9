#include "codegen/backends/cuda/cuda_executable.h"

#include <algorithm>

#include "codegen/backends/cuda/launch.h"
#include "cuda/allocator.h"
#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "cuda/tensors.h"
#include "util/check.h"
#include "zc/cuda.h"

namespace zc::codegen::cuda {

using zc::cuda::check;
using zc::cuda::driver;

std::string device_arch(int device, std::string* why) {
  if (!zc::cuda::is_available()) {
    *why = zc::cuda::unavailable_reason();
    return "";
  }
  if (device >= zc::cuda::device_count()) {
    *why = "there is no CUDA device " + std::to_string(device);
    return "";
  }
  const zc::cuda::DeviceProperties& p = zc::cuda::device_properties(device);
  return "sm_" + std::to_string(p.major) + std::to_string(p.minor);
}

namespace {

// Device memory of one call (the arena, the error flag), returned when the call ends.
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  DeviceBuffer(size_t bytes, int device) : ptr(bytes ? zc::cuda::allocate(bytes, device) : 0) {}
  ~DeviceBuffer() {
    if (ptr) zc::cuda::release(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(Schedule s, BufferPlan plan, std::span<const uint8_t> cubin)
      : schedule_(std::move(s)), plan_(std::move(plan)) {
    const ir::Graph& g = schedule_.graph;
    device_ = g.inputs.empty() ? 0 : g.meta(g.inputs[0].value).device.index;
    zc::cuda::use_device(device_);
    // The module stays loaded for the life of the process: an executable may be dropped
    // (compiler::reset) while the process exits, when unloading is no longer safe; a module is a
    // few kilobytes.
    check(driver().cuModuleLoadData(&module_, cubin.data()),
          "loading a compiled graph's cubin (built for another GPU architecture?)");
    launches_ = launch_plan(schedule_, plan_);
    for (const Launch& l : launches_) {
      CUfunction fn = nullptr;
      if (l.work > 0) {
        CUresult r = driver().cuModuleGetFunction(&fn, module_, l.symbol.c_str());
        if (r != CUDA_SUCCESS) {
          throw Error("compiled graph's cubin lacks kernel " + l.symbol +
                      " (a cubin from another schedule): " + zc::cuda::error_text(r));
        }
      }
      functions_.push_back(fn);
      has_error_flag_ = has_error_flag_ || l.error_flag;
    }
    for (ir::ValueId v : plan_.constants) {
      for (const ir::Constant& c : g.constants) {
        if (c.value == v) constants_.push_back(c.data.contiguous().to(Device::cuda(device_)));
      }
    }
    for (ir::ValueId v : schedule_.outputs) output_metas_.push_back(g.meta(v));
    sm_count_ = zc::cuda::device_properties(device_).multiprocessor_count;
  }

  std::vector<Tensor> run(std::span<const Tensor* const> inputs) const override {
    const ir::Graph& g = schedule_.graph;
    ZC_CHECK(inputs.size() == g.inputs.size(),
             "compiled graph takes " << g.inputs.size() << " inputs, got " << inputs.size());
    const Device device = Device::cuda(device_);
    std::vector<CUdeviceptr> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = *inputs[i];
      if (t.device() != device || !t.is_contiguous()) {
        throw Error("a graph compiled for " + device.str() + " got input " + std::to_string(i) +
                    " on " + t.device().str() + (t.is_contiguous() ? "" : ", not contiguous") +
                    "; move it with .to(" + device.str() + ") and make it contiguous");
      }
      in[i] = zc::cuda::device_address(t);
    }
    std::vector<Tensor> outputs;
    std::vector<CUdeviceptr> out;
    for (const ops::TensorMeta& m : output_metas_) {
      outputs.push_back(Tensor::empty(m.shape, m.dtype, device));
      out.push_back(zc::cuda::device_address(outputs.back()));
    }
    zc::cuda::use_device(device_);
    CUstream stream = zc::cuda::current_stream(device_);
    DeviceBuffer arena(static_cast<size_t>(plan_.arena_bytes), device_);
    DeviceBuffer error(has_error_flag_ ? sizeof(int) : 0, device_);
    if (has_error_flag_) zc::cuda::fill_words(error.ptr, 0, 1, device_);
    std::vector<CUdeviceptr> values;
    std::vector<void*> params;
    for (size_t k = 0; k < launches_.size(); ++k) {
      const Launch& l = launches_[k];
      if (l.work == 0) continue;
      values.clear();
      for (ir::ValueId b : l.buffers) {
        const BufferPlan::Slot& slot = plan_.slot[b];
        switch (slot.kind) {
          case BufferKind::input:
            values.push_back(in[slot.index]);
            break;
          case BufferKind::output:
            values.push_back(out[slot.index]);
            break;
          case BufferKind::constant:
            values.push_back(zc::cuda::device_address(constants_[slot.index]));
            break;
          case BufferKind::arena:
            values.push_back(arena.ptr + static_cast<CUdeviceptr>(slot.index));
            break;
        }
      }
      if (l.error_flag) values.push_back(error.ptr);
      params.clear();
      for (CUdeviceptr& v : values) params.push_back(&v);
      unsigned gx = 1, gy = 1, gz = 1;
      grid(l, &gx, &gy, &gz);
      check(driver().cuLaunchKernel(functions_[k], gx, gy, gz, l.block_x, l.block_y, 1, 0, stream,
                                    params.data(), nullptr),
            "launching " + l.symbol);
    }
    if (has_error_flag_) {
      int flag = 0;
      zc::cuda::copy_device_to_host(&flag, error.ptr, sizeof flag, device_);
      if (flag) {
        throw Error("embedding: an index is out of range for its table (compiled graph on " +
                    device.str() + "); check the token ids against the embedding's num_embeddings");
      }
    }
    return outputs;
  }

  std::string_view backend() const override { return "cuda"; }

 private:
  // Blocks to launch: enough to cover the work, at most what keeps every multiprocessor busy
  // for element loops (they stride past the grid), and within the hardware's limits.
  void grid(const Launch& l, unsigned* gx, unsigned* gy, unsigned* gz) const {
    const int64_t threads = int64_t{l.block_x} * l.block_y;
    switch (l.kind) {
      case KernelKind::row_reduce:
        *gx = static_cast<unsigned>(std::min<int64_t>(l.grid_x, int64_t{1} << 30));
        break;
      case KernelKind::matmul:
        ZC_CHECK(l.grid_y <= 65535, "matmul of " << l.grid_y * kMatmulTile << " rows");
        *gx = static_cast<unsigned>(std::min<int64_t>(l.grid_x, int64_t{1} << 30));
        *gy = static_cast<unsigned>(l.grid_y);
        *gz = static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(l.grid_z, 1), 65535));
        break;
      default:
        *gx = static_cast<unsigned>(std::max<int64_t>(
            1, std::min<int64_t>((l.work + threads - 1) / threads, int64_t{sm_count_} * 32)));
    }
  }

  Schedule schedule_;
  BufferPlan plan_;
  int device_ = 0;
  CUmodule module_ = nullptr;
  std::vector<Launch> launches_;
  std::vector<CUfunction> functions_;
  std::vector<Tensor> constants_;
  std::vector<ops::TensorMeta> output_metas_;
  int sm_count_ = 1;
  bool has_error_flag_ = false;
};

}  // namespace

std::shared_ptr<const Executable> make_cuda_executable(Schedule schedule, BufferPlan plan,
                                                       std::span<const uint8_t> cubin) {
  return std::make_shared<CudaExecutable>(std::move(schedule), std::move(plan), cubin);
}

}  // namespace zc::codegen::cuda
