#include "codegen/backends/cuda/emit.h"

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/backends/cuda/launch.h"
#include "codegen/backends/cuda/prelude.h"
#include "codegen/backends/cuda/programs.h"
#include "codegen/c_helpers.h"

namespace zc::codegen::cuda {

namespace {

// How much more NVRTC time a fused attention kernel costs per byte of source than the others
// (programs.h): 190 ms for its 5.8 KB against 6-7 ms a KB for pointwise kernels.
constexpr int kAttentionCompileWeight = 5;

}  // namespace

CudaModule emit(const Schedule& s, const BufferPlan& plan) {
  CudaModule m;
  CodeWriter w;
  w.raw(kPrelude);
  w.raw(kSharedHelpers);
  w.raw(kBlockReductions);
  KernelEmitter emitter(s, plan, w);
  std::vector<Launch> launches = launch_plan(s, plan);
  for (size_t k = 0; k < launches.size(); ++k) {
    m.extern_ops += launches[k].conv.has_value();
    if (!launches[k].has_kernel) continue;       // a library product or convolution alone
    if (launches[k].packed_into >= 0) continue;  // emitted with its pack's first member
    if (launches[k].pack) {
      // One marker for the whole pack: its members and its kernel stay in one program.
      const std::vector<int32_t>& members = launches[k].pack->members;
      w.line(std::string(kKernelMarker) + std::to_string(k) + "-" + std::to_string(members.back()) +
             ": pack");
      emitter.emit_pack(static_cast<int32_t>(k), launches);
      m.kernels += static_cast<int>(members.size());
      continue;
    }
    w.line(std::string(kKernelMarker) + std::to_string(k) + ": " +
           kernel_kind_name(launches[k].kind) + (launches[k].library ? " epilogue" : "") +
           (launches[k].kind == KernelKind::attention
                ? std::string(kWeightMarker) + std::to_string(kAttentionCompileWeight)
                : std::string()));
    emitter.emit(static_cast<int32_t>(k), launches[k]);
    ++m.kernels;
  }
  m.source = w.str();
  m.sizes = emitter.take_sizes();
  return m;
}

}  // namespace zc::codegen::cuda
