#include "codegen/backends/cuda/emit.h"

#include "codegen/backends/cuda/kernel_emitter.h"
#include "codegen/backends/cuda/launch.h"
#include "codegen/backends/cuda/prelude.h"
#include "codegen/backends/cuda/programs.h"
#include "codegen/c_helpers.h"

namespace zc::codegen::cuda {

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
    if (!launches[k].has_kernel) continue;  // a library product or convolution alone
    w.line(std::string(kKernelMarker) + std::to_string(k) + ": " +
           kernel_kind_name(launches[k].kind) + (launches[k].library ? " epilogue" : ""));
    emitter.emit(static_cast<int32_t>(k), launches[k]);
    ++m.kernels;
  }
  m.source = w.str();
  m.sizes = emitter.take_sizes();
  return m;
}

}  // namespace zc::codegen::cuda
