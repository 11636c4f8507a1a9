#include "codegen/backends/cuda/backend.h"

#include <future>
#include <mutex>

#include "codegen/backends/cuda/emit.h"
#include "codegen/backends/cuda/executable.h"
#include "codegen/backends/cuda/graph_executable.h"
#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/backends/cuda/kernel_profile.h"
#include "codegen/backends/cuda/launch.h"
#include "codegen/backends/cuda/packs.h"
#include "codegen/backends/cuda/programs.h"
#include "codegen/backends/cuda/support.h"
#include "cuda/blaslt_start.h"
#include "cuda/cudnn.h"
#include "toolchain/nvrtc.h"
#include "zc/cuda.h"

namespace zc::codegen::cuda {

namespace {

// Matmuls of more multiply-adds go to cuBLASLt.
constexpr int64_t kLibraryMatmulMinFlops = 32 * 32 * 32;

// NVRTC's options. Real-architecture cubins need no JIT at load; fast-math stays off, so
// float results follow the same numerics contract as the CPU backend's.
const std::vector<std::string>& nvrtc_options() {
  static const std::vector<std::string> options{"--std=c++17", "--minimal"};
  return options;
}

class CudaBackend final : public Backend, private SchedulePolicy {
 public:
  explicit CudaBackend(CudaOptions options) : opt_(std::move(options)) {}

  std::string_view name() const override { return "cuda"; }
  Device::Type device() const override { return Device::Type::cuda; }

  std::string unavailable_reason() const override {
    std::call_once(state_once_, [&] {
      // The GPU first: without one (the common case on a CPU machine) the answer costs a failed
      // dlopen of the driver, not the load of NVRTC's large library.
      std::string why;
      arch_ = opt_.arch.empty() ? device_arch(0, &why) : opt_.arch;
      if (arch_.empty()) {
        reason_ = why;
      } else if (!toolchain::find_nvrtc(&why)) {
        reason_ = why;
      }
    });
    return reason_;
  }

  const KeyParts& key_parts() const override {
    std::call_once(key_once_, [&] {
      unavailable_reason();
      key_.codegen = "cuda;block=256;row_block<=256,1024<" + std::to_string(kFewRows) +
                     ";matmul_threads=" + std::to_string(kMatmulThreads) +
                     ";matmul_k=" + std::to_string(kMatmulTileK) + ";matmul_micro=4@64" +
                     ";attention_threads=" + std::to_string(kAttentionThreads) +
                     ";library_matmul>" + std::to_string(kLibraryMatmulMinFlops) +
                     ";rows<=" + std::to_string(kRowsMaxM) + "," + std::to_string(kRowsLongMaxM) +
                     ">" + std::to_string(kRowsShortK) + "x" + std::to_string(kRowsWarps) + "u" +
                     std::to_string(kRowsUnroll) + ";programs<=" + std::to_string(kMaxPrograms) +
                     "x" + std::to_string(kProgramBytes) +
                     ";pack<=" + std::to_string(kMaxPackMembers);
      // A cubin for a real architecture runs on any driver that supports the GPU, without a
      // JIT step, so the driver's version does not decide the binary and is not part of it.
      if (!arch_.empty()) key_.target = "cuda{arch=" + arch_ + "}";
      std::string options;
      for (const std::string& o : nvrtc_options()) options += " " + o;
      // Without a GPU or NVRTC nothing is built or loaded here, and NVRTC is not looked for.
      if (!reason_.empty() && opt_.arch.empty()) return;
      if (auto nvrtc = toolchain::find_nvrtc()) key_.toolchain = nvrtc->identity() + options;
      // cuDNN runs the convolutions (its algorithm choice is in the binary's behaviour, not in
      // the source): the library that ran them names the code.
      if (zc::cuda::cudnn_convolutions()) key_.toolchain += ";" + zc::cuda::cudnn_identity();
    });
    return key_;
  }

  const SchedulePolicy& policy() const override { return *this; }

  // Packed launches run their members at the same time (packs.h).
  std::vector<int32_t> runs_together(const Schedule& s) const override { return pack_runs(s); }

  // Attention and its backward as fused kernels: no [Tq, Tk] scores in memory
  // (attention*.cpp). Convolutions are generated as columns and a cuBLASLt product, or
  // with ZC_CUDA_CONV=cudnn run by cuDNN (cuda/cudnn.h) with what follows them (bias, residual,
  // ReLU) in the same call (lower/channels_last.h: conv_epilogues).
  std::vector<ops::OpId> native_ops() const override {
    std::vector<ops::OpId> ops{ops::OpId::attention, ops::OpId::attention_lse,
                               ops::OpId::attention_grad};
    if (zc::cuda::cudnn_convolutions()) ops.push_back(ops::OpId::conv2d);
    return ops;
  }

  GeneratedSource emit(const Schedule& s, const BufferPlan& plan) const override {
    start_library(s);
    CudaModule m = cuda::emit(s, plan);
    return GeneratedSource{std::move(m.source), m.kernels, m.extern_ops, std::move(m.sizes),
                           kSymbolArray};
  }

  // A graph of cuDNN convolutions alone (a ResNet block) has nothing for NVRTC. (The support
  // kernels' source counts neither kernels nor extern ops, and is built.)
  bool needs_build(const GeneratedSource& source) const override {
    return source.generated_kernels > 0 || source.extern_ops == 0;
  }

  std::vector<uint8_t> build(const GeneratedSource& source) const override {
    std::string why = unavailable_reason();
    if (!why.empty()) throw Error("the CUDA backend cannot build here: " + why);
    // A large source as programs compiled side by side (programs.h): this thread compiles the
    // first, threads of their own the others, each in whichever NVRTC is free first.
    const std::vector<std::string> programs = split_programs(source.text);
    auto compile = [&](size_t i) {
      return toolchain::compile_cubin(programs[i], arch_, nvrtc_options()).cubin;
    };
    std::vector<std::future<std::vector<uint8_t>>> others;
    for (size_t i = 1; i < programs.size(); ++i) {
      others.push_back(std::async(std::launch::async, compile, i));
    }
    std::vector<std::vector<uint8_t>> cubins{compile(0)};
    for (auto& f : others) cubins.push_back(f.get());
    return pack_cubins(cubins);
  }

  std::shared_ptr<const Executable> load(Schedule s, BufferPlan plan,
                                         std::span<const uint8_t> binary) const override {
    return make_cuda_executable(std::move(s), std::move(plan), binary);
  }

  // Kernels read the sizes that vary from a ZcSym parameter; grids, cuBLASLt's problems and the
  // arena come from each size's own schedule and plan (launch_plan) when it loads.
  bool serves_many_sizes() const override { return true; }
  size_t max_symbols() const override { return kMaxSymbols; }
  std::shared_ptr<const Executable> load_for_size(Schedule s, BufferPlan plan,
                                                  std::span<const uint8_t> binary,
                                                  std::vector<int64_t> symbols) const override {
    return make_cuda_executable(std::move(s), std::move(plan), binary, std::move(symbols));
  }

  std::string support_source() const override { return cuda::support_source(); }
  void load_support(std::span<const uint8_t> binary) const override { set_support_binary(binary); }
  Tensor dense_copy(const Tensor& t) const override { return cuda::dense_copy(t); }

  // One block per row (reductions.cpp): a loss over a whole batch would be one block.
  bool splits_long_reductions() const override { return true; }

  std::shared_ptr<const Executable> replayable(std::shared_ptr<const Executable> exec,
                                               std::vector<bool> per_call) const override {
    auto* raw = dynamic_cast<const RawExecutable*>(exec.get());
    if (!raw || !raw->can_run_raw() || !exec->device().is_cuda()) return exec;
    // A replay runs kernels that ZC_LOGS=kernels cannot bracket with its events.
    if (timing_kernels()) return exec;
    return make_graph_executable(std::move(exec), std::move(per_call));
  }

 private:
  bool supports(ops::OpId, DType) const override { return true; }
  // cuBLASLt for every product of a float dtype but the smallest (seed64's 10x10 layers stay in
  // the generated kernel, fused with their epilogue, where a library call would cost more than
  // the arithmetic); integer products are generated.
  // cuBLASLt multiplies f16/bf16 on the tensor cores with f32 accumulation: a bf16 model's
  // products read its bf16 weights and activations, never an f32 copy of them.
  bool matmul_reads_half_operands() const override { return true; }
  // A weight-only int8 layer's weight is read as int8 by the generated product (the rows form
  // at a decode step's few rows): half the bytes of a bf16 weight, where reading the weight is
  // the step's cost.
  bool matmul_reads_int8_operands() const override { return true; }
  // Its loads convert too: a bf16 layer_norm's weight and bias are read where they are, and the
  // normalization stays one kernel as in f32.
  bool elementwise_reads_half_inputs() const override { return true; }

  // Every size of a varying float product through cuBLASLt (its problem is set per size at
  // load); the generated kernel for the rest, whose bounds are symbols like any loop's.
  MatmulPath matmul_path_any_size(const ops::MatmulShapes& d, DType dtype) const override {
    const bool float_type =
        dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
    return float_type && !d.a_vec && !d.b_vec ? MatmulPath::library : MatmulPath::inline_loop;
  }

  // Products of a few rows (a decode step's linear layers, M = the batch; its attention's
  // scores, M = a group of query heads) stream the weight (matmul.cpp, rows): at M = 1 a
  // cuBLASLt call took 10-20 us for a 1-8 MB bf16 weight on the H200, which the memory reads
  // in 0.2-1.7 us. Each row costs a lane a load of A and v multiply-adds per chunk of the
  // weight, so long rows go there only at M <= kRowsLongMaxM: a TinyLlama-shaped decode at
  // batch 8 (M = 8, k = 2048 and 5632) fell from 343 to 223 tokens/s per sequence in this form,
  // where the library's tensor cores serve eight rows for the price of one. Short rows (an
  // attention's scores over a head dim of 64 against a cached key, M = 8) cost little either
  // way and stay here up to kRowsMaxM.
  bool matmul_streams_rows(const ops::MatmulShapes& d, DType dtype) const override {
    const bool float_type =
        dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
    const int64_t max_m = d.K <= kRowsShortK ? kRowsMaxM : kRowsLongMaxM;
    return float_type && d.M <= max_m && d.K >= 32;
  }

  MatmulPath matmul_path(const ops::MatmulShapes& d, DType dtype) const override {
    const bool float_type =
        dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
    const bool large = shape_numel(d.batch) * d.M * d.N * d.K > kLibraryMatmulMinFlops;
    return float_type && large && !d.a_vec && !d.b_vec ? MatmulPath::library
                                                       : MatmulPath::inline_loop;
  }

  // A schedule with cuBLASLt products starts the library on its device now, on a background
  // thread, so that it is ready (or nearly) when the compiled graph first runs: a cold compile's
  // NVRTC run and the library's 100-200 ms start overlap.
  static void start_library(const Schedule& s) {
    if (!zc::cuda::is_available() || s.graph.inputs.empty()) return;
    const Device device = s.graph.meta(s.graph.inputs[0].value).device;
    if (!device.is_cuda()) return;
    for (const Kernel& k : s.kernels) {
      if (k.kind == KernelKind::matmul && k.library) return zc::cuda::start_blaslt(device.index);
    }
  }

  CudaOptions opt_;
  mutable std::once_flag state_once_, key_once_;
  mutable std::string reason_, arch_;
  mutable KeyParts key_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(CudaOptions options) {
  return std::make_unique<CudaBackend>(std::move(options));
}

}  // namespace zc::codegen::cuda
