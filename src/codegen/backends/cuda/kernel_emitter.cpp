#include "codegen/backends/cuda/kernel_emitter.h"

#include <algorithm>

#include "codegen/c_expr.h"
#include "util/check.h"

namespace zc::codegen::cuda {

using ir::ValueId;

void KernelEmitter::emit(int32_t k, const Launch& launch) {
  kernel_ = k;
  launch_ = &launch;
  library_output_ = -1;
  w_ = CodeWriter(1);
  w_.line(std::string("typedef ") + (launch.use_32bit_index ? "int" : "int64_t") + " idx_t;");
  // The symbols in the index type: size arithmetic stays in 32 bits where indices are.
  if (s_.symbolic()) {
    w_.line("idx_t " + std::string(kSymbolArray) + "[" + std::to_string(kMaxSymbols) + "];");
    w_.line("#pragma unroll");
    w_.line("for (int zc_n = 0; zc_n < " + std::to_string(kMaxSymbols) + "; ++zc_n) " +
            std::string(kSymbolArray) + "[zc_n] = (idx_t)zc_sym.v[zc_n];");
  }
  const Kernel& K = s_.kernels[k];
  switch (K.kind) {
    case KernelKind::pointwise:
      emit_pointwise(K, launch);
      break;
    case KernelKind::row_reduce:
      emit_row_reduce(K);
      break;
    case KernelKind::matmul:
      emit_matmul(K, launch);
      break;
    case KernelKind::copy:
      emit_copy(K, launch);
      break;
    case KernelKind::concat:
      emit_concat(K);
      break;
    case KernelKind::gather:
      emit_gather(K, launch);
      break;
    case KernelKind::attention:
      emit_attention(K, launch);
      break;
    case KernelKind::extern_op:
      ZC_CHECK(false, "extern kernels are not generated");
  }
  std::string params;
  for (ValueId b : launch.buffers) {
    const BufferPlan::Slot& slot = plan_.slot[b];
    bool writes = slot.kind == BufferKind::output || slot.kind == BufferKind::arena;
    params += std::string(params.empty() ? "" : ", ") + (writes ? "" : "const ") +
              storage_type(s_.graph.meta(b).dtype) + "* __restrict__ " + buffer(b);
  }
  if (launch.error_flag) params += std::string(params.empty() ? "" : ", ") + "int* zc_err";
  // Code for many sizes reads the sizes that vary from the symbols (size_template.h).
  if (s_.symbolic()) params += std::string(params.empty() ? "" : ", ") + "const ZcSym zc_sym";
  out_.open("extern \"C\" __global__ void __launch_bounds__(" +
            std::to_string(launch.block_x * launch.block_y) + ") " + launch.symbol + "(" + params +
            ")");
  out_.raw(w_.str());
  out_.close();
  out_.blank();
}

std::string KernelEmitter::buffer(ValueId base) const {
  ZC_CHECK(std::binary_search(launch_->buffers.begin(), launch_->buffers.end(), base),
           "kernel " << kernel_ << " touches %" << base << ", which its launch plan lacks");
  return "b" + std::to_string(base);
}

void KernelEmitter::open_grid_loop(int64_t n) {
  w_.open("for (idx_t zc_i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; zc_i < " + num(n) +
          "; zc_i += (idx_t)gridDim.x * blockDim.x)");
}

KernelEmitter::Names KernelEmitter::decompose(const Shape& shape, const std::string& linear,
                                              const std::string& prefix) {
  Names names(shape.size(), "0");
  int outermost = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > 1) {
      outermost = static_cast<int>(d);
      break;
    }
  }
  if (outermost < 0) return names;
  std::string rest = "zc_r" + prefix;
  w_.line("idx_t " + rest + " = " + linear + ";");
  for (int d = static_cast<int>(shape.size()) - 1; d >= outermost; --d) {
    if (shape[d] <= 1) continue;
    names[d] = prefix + std::to_string(d);
    if (d == outermost) {
      w_.line("const idx_t " + names[d] + " = " + rest + ";");
    } else {
      std::string size = num(shape[d]);
      w_.line("const idx_t " + names[d] + " = " + rest + " % " + size + "; " + rest +
              " /= " + size + ";");
    }
  }
  return names;
}

}  // namespace zc::codegen::cuda
