#include "codegen/backends/cuda/executable.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>

#include "codegen/backends/cuda/device_errors.h"
#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/backends/cuda/kernel_profile.h"
#include "codegen/backends/cuda/launch.h"
#include "codegen/backends/cuda/packs.h"
#include "codegen/backends/cuda/programs.h"
#include "codegen/call_buffers.h"
#include "cuda/allocator.h"
#include "cuda/blaslt_start.h"
#include "cuda/cudnn.h"
#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "cuda/tensors.h"
#include "util/check.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/timer.h"
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
  return zc::cuda::sm_arch(device);
}

namespace {

// The module of `cubin` on the current device (`device`). Modules stay loaded for the life of
// the process: an executable may be dropped (compiler::reset) while the process exits, when
// unloading is no longer safe; a module is a few kilobytes.
CUmodule load_module(std::span<const uint8_t> cubin) {
  CUmodule module = nullptr;
  check(driver().cuModuleLoadData(&module, cubin.data()),
        "loading a compiled graph's cubin (built for another GPU architecture?)");
  return module;
}

// A size template's cubin serves many sizes, each its own executable: they share one module.
// Only those are hashed; a start that loads every graph of a model from the cache hashes none.
CUmodule shared_module(std::span<const uint8_t> cubin, int device) {
  static std::mutex mu;
  static std::map<std::pair<Digest, int>, CUmodule> loaded;
  const std::pair<Digest, int> key{sha256(cubin), device};
  std::lock_guard lock(mu);
  auto it = loaded.find(key);
  if (it != loaded.end()) return it->second;
  CUmodule module = load_module(cubin);
  loaded.emplace(key, module);
  return module;
}

// Where a call's convolution scratch starts in its arena lease: after the planned buffers.
int64_t conv_workspace_offset(const BufferPlan& plan) {
  return (plan.arena_bytes + 255) / 256 * 256;
}

// cuDNN's plan for each launch that is a convolution (null for the others), made with the
// executable: descriptors and the algorithm once, not per call.
std::vector<std::unique_ptr<zc::cuda::ConvPlan>> conv_plans(const std::vector<Launch>& launches,
                                                            int device) {
  std::vector<std::unique_ptr<zc::cuda::ConvPlan>> plans;
  for (const Launch& l : launches) {
    plans.push_back(l.conv && l.work > 0
                        ? std::make_unique<zc::cuda::ConvPlan>(l.conv->problem, device)
                        : nullptr);
    if (plans.back()) ZC_LOG(kernels) << "cuDNN: " << plans.back()->describe();
  }
  return plans;
}

// The arena a call leases: the planned buffers, then the largest convolution scratch.
int64_t call_scratch_bytes(const BufferPlan& plan,
                           const std::vector<std::unique_ptr<zc::cuda::ConvPlan>>& convs) {
  size_t workspace = 0;
  for (const auto& c : convs) workspace = std::max(workspace, c ? c->workspace_bytes() : 0);
  return workspace == 0 ? plan.arena_bytes
                        : conv_workspace_offset(plan) + static_cast<int64_t>(workspace);
}

class CudaExecutable final : public RawExecutable,
                             public std::enable_shared_from_this<CudaExecutable> {
 public:
  CudaExecutable(Schedule s, BufferPlan plan, std::span<const uint8_t> cubin,
                 std::vector<int64_t> symbols)
      : schedule_(std::move(s)),
        plan_(std::move(plan)),
        device_(device_of(schedule_.graph)),
        launches_(launch_plan(schedule_, plan_)),
        convs_((zc::cuda::use_device(device_), conv_plans(launches_, device_))),
        scratch_bytes_(call_scratch_bytes(plan_, convs_)),
        arenas_(scratch_bytes_, Device::cuda(device_)) {
    const ir::Graph& g = schedule_.graph;
    zc::cuda::use_device(device_);
    Timer timer;
    // A graph of convolutions alone has no generated kernel, and its binary is empty; a large
    // one's kernels are in several cubins (programs.h).
    for (const std::vector<uint8_t>& c : unpack_cubins(cubin)) {
      modules_.push_back(schedule_.symbolic() ? shared_module(c, device_) : load_module(c));
    }
    const double module_ms = timer.ms();
    if (schedule_.symbolic()) {
      if (symbols.size() > kMaxSymbols) {
        throw Error("a size template's cubin takes at most " + std::to_string(kMaxSymbols) +
                    " symbols, got " + std::to_string(symbols.size()));
      }
      for (size_t i = 0; i < symbols.size(); ++i) symbols_[i] = symbols[i];
    }
    for (size_t k = 0; k < launches_.size(); ++k) {
      const Launch& l = launches_[k];
      CUfunction fn = nullptr;
      // A pack's later members run inside its first member's launch (packs.h).
      if (l.work > 0 && l.has_kernel && l.packed_into < 0) {
        const std::string symbol = l.pack ? pack_symbol(k) : l.symbol;
        CUresult r = CUDA_ERROR_NOT_FOUND;
        for (size_t m = 0; m < modules_.size() && r == CUDA_ERROR_NOT_FOUND; ++m) {
          r = driver().cuModuleGetFunction(&fn, modules_[m], symbol.c_str());
        }
        if (r != CUDA_SUCCESS) {
          throw Error("compiled graph's cubin lacks kernel " + symbol +
                      " (a cubin from another schedule): " + zc::cuda::error_text(r));
        }
        // CUDA loads a kernel at its first launch unless told to (lazy loading): loaded here,
        // a warm process's first call launches without those loads, and a training step's
        // backward loads while its forward runs (runtime/driver/graph_variants.h).
        if (driver().cuFuncLoad) check(driver().cuFuncLoad(fn), "loading kernel " + symbol);
      }
      functions_.push_back(fn);
      if (timing_kernels()) labels_.push_back(launch_label(schedule_, launches_, k));
      has_error_flag_ = has_error_flag_ || l.error_flag;
      has_library_ = has_library_ || (l.library && l.work > 0);
    }
    const double kernels_ms = timer.ms() - module_ms;
    // cuBLASLt's 100-200 ms start runs on a background thread from now on, while the caller
    // gets on with its first call (cuda/blaslt_start.h).
    if (has_library_) zc::cuda::start_blaslt(device_);
    // The constants go to memory of the executable's own, uploaded without waiting for the
    // device's queued work: a training step's backward loads while its forward runs, and a copy
    // through the device's stream would hold the load until the forward is done.
    for (ir::ValueId v : plan_.constants) {
      for (const ir::Constant& c : g.constants) {
        if (c.value != v) continue;
        const Tensor host = c.data.contiguous();
        const size_t bytes = static_cast<size_t>(host.numel()) * dtype_size(host.dtype());
        CUdeviceptr ptr = 0;
        check(driver().cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)), "a compiled graph's constant");
        constants_.push_back(ptr);
        zc::cuda::upload_to_unused(ptr, codegen::data_address(host), bytes, device_);
      }
    }
    for (ir::ValueId v : schedule_.outputs) {
      output_metas_.push_back(g.meta(v));
      output_metas_.back().device = Device::cuda(device_);
    }
    sm_count_ = zc::cuda::device_properties(device_).multiprocessor_count;
    if (has_error_flag_) error_flag_ = device_error_flag(device_);
    ZC_LOG(timing) << "cuda executable on cuda:" << device_ << ": module " << module_ms << " ms ("
                   << cubin.size() << " bytes), " << launches_.size() << " launches' kernels "
                   << kernels_ms << " ms, all " << timer.ms() << " ms";
  }

  // with_tf32's executable: `base`'s module, kernels and constants (kept alive through it),
  // with `launches` (its own library problems) and cuDNN plans of its own.
  CudaExecutable(std::shared_ptr<const CudaExecutable> base, std::vector<Launch> launches)
      : schedule_(base->schedule_),
        plan_(base->plan_),
        device_(base->device_),
        launches_(std::move(launches)),
        convs_((zc::cuda::use_device(device_), conv_plans(launches_, device_))),
        scratch_bytes_(call_scratch_bytes(plan_, convs_)),
        arenas_(scratch_bytes_, Device::cuda(device_)),
        error_flag_(base->error_flag_),
        modules_(base->modules_),
        symbols_(base->symbols_),
        functions_(base->functions_),
        has_library_(base->has_library_),
        constants_(base->constants_),
        output_metas_(base->output_metas_),
        sm_count_(base->sm_count_),
        has_error_flag_(base->has_error_flag_),
        base_(std::move(base)) {
    if (timing_kernels()) {
      for (size_t k = 0; k < launches_.size(); ++k)
        labels_.push_back(launch_label(schedule_, launches_, k));
    }
  }

  // f32 cuBLASLt products with CUBLAS_COMPUTE_32F_FAST_TF32, f32 cuDNN convolutions with tensor
  // ops; null when there is neither.
  std::shared_ptr<const Executable> with_tf32() const override {
    std::vector<Launch> launches = launches_;
    bool any = false;
    for (Launch& l : launches) {
      if (l.library && l.library->problem.a == DType::f32 && l.library->problem.b == DType::f32) {
        l.library->problem.allow_tf32 = any = true;
      }
      if (l.conv && l.conv->problem.dtype == DType::f32) l.conv->problem.tf32 = any = true;
    }
    if (!any) return nullptr;
    return std::make_shared<CudaExecutable>(shared_from_this(), std::move(launches));
  }

  ~CudaExecutable() override {
    if (constants_.empty() || base_) return;  // a variant's constants are its base's
    // Kernels still queued (on any stream) may read the constants: they finish first. While the
    // process exits the driver may be gone, and the memory with it.
    try {
      zc::cuda::use_device(device_);
      if (driver().cuCtxSynchronize() != CUDA_SUCCESS) return;
      for (CUdeviceptr p : constants_) driver().cuMemFree(p);
    } catch (const std::exception&) {
    }
  }
  CudaExecutable(const CudaExecutable&) = delete;
  CudaExecutable& operator=(const CudaExecutable&) = delete;

  std::vector<Tensor> run(std::span<const Tensor* const> inputs) const override {
    const ir::Graph& g = schedule_.graph;
    ZC_CHECK(inputs.size() == g.inputs.size(),
             "compiled graph takes " << g.inputs.size() << " inputs, got " << inputs.size());
    const Device device = Device::cuda(device_);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i]->device() != device) {
        throw Error("a graph compiled for " + device.str() + " got input " + std::to_string(i) +
                    " on " + inputs[i]->device().str() + "; move it with .to(" + device.str() +
                    ")");
      }
    }
    std::vector<Tensor> keep;
    std::vector<void*> in = dense_inputs(inputs, keep), out;
    std::vector<Tensor> outputs = new_outputs(output_metas_, out);
    ArenaPool::Lease arena = arenas_.take();
    // The flag is asked only while timing is logged: a call costs nothing more otherwise.
    FirstRunTimer first(device_, logging::enabled(logging::Topic::timing) && !ran_.exchange(true));
    run_raw(in.data(), out.data(), arena.get());
    if (first) {
      first.done("(" + std::to_string(launches_.size()) + " kernels, arena " +
                 std::to_string(plan_.arena_bytes) + " bytes)");
    }
    finish_run();
    return outputs;
  }

  int64_t scratch_bytes() const override { return scratch_bytes_; }

  void run_raw(void* const* inputs, void* const* outputs, char* scratch,
               const InputIdentity* = nullptr) const override {
    zc::cuda::use_device(device_);
    CUstream stream = zc::cuda::current_stream(device_);
    auto address = [](void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); };
    // The device address of the buffer holding base value b.
    auto buffer = [&](ir::ValueId b) -> CUdeviceptr {
      const BufferPlan::Slot& slot = plan_.slot[b];
      switch (slot.kind) {
        case BufferKind::input:
          return address(inputs[slot.index]);
        case BufferKind::output:
          return address(outputs[slot.index]);
        case BufferKind::constant:
          return constants_[slot.index];
        case BufferKind::arena:
          return address(scratch) + static_cast<CUdeviceptr>(slot.index);
      }
      return 0;
    };
    // Asked by the calling thread so that, if the start is still under way, this thread waits
    // for it before the process can exit (gemm() below waits for it anyway).
    if (has_library_) zc::cuda::blaslt_start_state(device_);
    std::vector<CUdeviceptr> values;
    std::vector<void*> params;
    KernelTimer timer(stream, launches_.size());  // ZC_LOGS=kernels
    for (size_t k = 0; k < launches_.size(); ++k) {
      const Launch& l = launches_[k];
      if (l.work == 0 || l.packed_into >= 0) continue;
      timer.before(k);
      if (l.conv) {
        const LibraryConv& c = *l.conv;
        auto at = [&](ir::ValueId b, int64_t offset) -> CUdeviceptr {
          return b < 0 ? 0 : buffer(b) + offset * dtype_size(c.problem.dtype);
        };
        convs_[k]->run(at(c.x, c.x_offset), at(c.w, c.w_offset), at(c.bias, c.bias_offset),
                       at(c.residual, c.residual_offset), at(c.y, c.y_offset),
                       address(scratch) + conv_workspace_offset(plan_), stream);
        timer.after(k);
        continue;
      }
      if (l.library) {
        const LibraryMatmul& lm = *l.library;
        const CUdeviceptr esize = dtype_size(lm.problem.a);
        zc::cuda::gemm(lm.problem, buffer(lm.a) + lm.a_offset * esize,
                       buffer(lm.b) + lm.b_offset * dtype_size(lm.problem.b),
                       buffer(lm.d) + lm.d_offset * dtype_size(lm.problem.d), 0, device_, stream);
        if (!l.has_kernel) {
          timer.after(k);
          continue;
        }
      }
      values.clear();
      const std::vector<ir::ValueId>& buffers = l.pack ? l.pack->buffers : l.buffers;
      for (ir::ValueId b : buffers) values.push_back(buffer(b));
      if (l.pack ? l.pack->error_flag : l.error_flag) values.push_back(error_flag_);
      params.clear();
      for (CUdeviceptr& v : values) params.push_back(&v);
      // The kernel's ZcSym, by value.
      if (schedule_.symbolic()) params.push_back(const_cast<int64_t*>(symbols_.data()));
      unsigned gx = 1, gy = 1, gz = 1;
      // A pack: each member's blocks as it would have alone, one after another (ZcPackEnds).
      std::array<unsigned, kMaxPackMembers> ends{};
      if (l.pack) {
        uint64_t blocks = 0;
        for (size_t i = 0; i < l.pack->members.size(); ++i) {
          unsigned mx = 1, my = 1, mz = 1;
          grid(launches_[l.pack->members[i]], &mx, &my, &mz);
          ZC_CHECK(my == 1 && mz == 1, "a packed launch with a grid of more than one dim");
          blocks += mx;
          ZC_CHECK(blocks < (uint64_t{1} << 31), "a packed launch of " << blocks << " blocks");
          ends[i] = static_cast<unsigned>(blocks);
        }
        gx = static_cast<unsigned>(blocks);
        params.push_back(ends.data());
      } else {
        grid(l, &gx, &gy, &gz);
      }
      check(driver().cuLaunchKernel(functions_[k], gx, gy, gz, l.block_x, l.block_y, 1, 0, stream,
                                    params.data(), nullptr),
            "launching " + l.symbol);
      timer.after(k);
    }
    timer.finish(labels_);
  }

  void finish_run() const override {
    if (has_error_flag_) raise_device_errors(device_);
  }

  Device device() const override { return Device::cuda(device_); }

  std::string_view backend() const override { return "cuda"; }

 private:
  // Blocks to launch: enough to cover the work, at most what keeps every multiprocessor busy
  // for element loops (they stride past the grid), and within the hardware's limits.
  void grid(const Launch& l, unsigned* gx, unsigned* gy, unsigned* gz) const {
    const int64_t threads = int64_t{l.block_x} * l.block_y;
    // A library matmul's kernel is its epilogue: a grid-stride loop like any pointwise kernel.
    switch (l.library ? KernelKind::pointwise : l.kind) {
      case KernelKind::row_reduce:
        *gx = static_cast<unsigned>(std::min<int64_t>(l.grid_x, int64_t{1} << 30));
        break;
      case KernelKind::matmul:
        ZC_CHECK(l.grid_y <= 65535, "matmul of " << l.grid_y << " tiles of rows");
        *gx = static_cast<unsigned>(std::min<int64_t>(l.grid_x, int64_t{1} << 30));
        *gy = static_cast<unsigned>(l.grid_y);
        *gz = static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(l.grid_z, 1), 65535));
        break;
      case KernelKind::attention:
        // x: blocks of query rows (each block's rows are fixed by blockIdx.x, so x is exact);
        // y: batch items, which the kernel strides over past 65535.
        ZC_CHECK(l.grid_x <= (int64_t{1} << 30), "attention over " << l.grid_x << " row blocks");
        *gx = static_cast<unsigned>(l.grid_x);
        *gy = static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(l.grid_y, 1), 65535));
        break;
      default: {
        // Vector steps of l.vector elements (the element loop for misaligned inputs strides
        // over the same grid).
        const int64_t steps = l.work / l.vector;
        *gx = static_cast<unsigned>(std::max<int64_t>(
            1, std::min<int64_t>((steps + threads - 1) / threads, int64_t{sm_count_} * 32)));
      }
    }
  }

  // The device of the graph's inputs (every input of a compiled CUDA graph is on one).
  static int device_of(const ir::Graph& g) {
    return g.inputs.empty() ? 0 : g.meta(g.inputs[0].value).device.index;
  }

  Schedule schedule_;
  BufferPlan plan_;
  int device_ = 0;
  std::vector<Launch> launches_;
  std::vector<std::unique_ptr<zc::cuda::ConvPlan>> convs_;  // per launch (cuda/cudnn.h)
  int64_t scratch_bytes_ = 0;                               // call_scratch_bytes()
  ArenaPool arenas_;
  CUdeviceptr error_flag_ = 0;
  std::vector<CUmodule> modules_;
  std::array<int64_t, kMaxSymbols> symbols_{};  // ZcSym, for a symbolic schedule
  std::vector<CUfunction> functions_;
  std::vector<std::string> labels_;     // per launch, when timing kernels (ZC_LOGS=kernels)
  bool has_library_ = false;            // some launch is a cuBLASLt product
  std::vector<CUdeviceptr> constants_;  // from cuMemAlloc; freed with the executable
  std::vector<ops::TensorMeta> output_metas_;
  int sm_count_ = 1;
  bool has_error_flag_ = false;
  std::shared_ptr<const CudaExecutable> base_;  // with_tf32's variant: what owns the constants
  mutable std::atomic<bool> ran_{false};        // for the timing log's first run
};

}  // namespace

std::shared_ptr<const Executable> make_cuda_executable(Schedule schedule, BufferPlan plan,
                                                       std::span<const uint8_t> cubin,
                                                       std::vector<int64_t> symbols) {
  return std::make_shared<CudaExecutable>(std::move(schedule), std::move(plan), cubin,
                                          std::move(symbols));
}

}  // namespace zc::codegen::cuda
