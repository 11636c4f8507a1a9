#include "codegen/backends/cuda/kernel_emitter.h"

#include <algorithm>

#include "codegen/backends/cuda/packs.h"
#include "codegen/c_expr.h"
#include "util/check.h"

namespace zc::codegen::cuda {

using ir::ValueId;

void KernelEmitter::emit_function(int32_t k, const Launch& launch, bool member) {
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
  std::string params = parameters(launch.buffers, launch.error_flag);
  // Code for many sizes reads the sizes that vary from the symbols (size_template.h).
  if (s_.symbolic()) params += std::string(params.empty() ? "" : ", ") + "const ZcSym zc_sym";
  if (member) {
    // A pack's member (packs.h): its blocks' numbers and count are parameters, which the body
    // reads in place of CUDA's built-ins of those names.
    params +=
        std::string(params.empty() ? "" : ", ") + "const ZcGrid blockIdx, const ZcGrid gridDim";
    out_.open("static __device__ __forceinline__ void " + launch.symbol + "(" + params + ")");
  } else {
    out_.open("extern \"C\" __global__ void __launch_bounds__(" +
              std::to_string(launch.block_x * launch.block_y) + ") " + launch.symbol + "(" +
              params + ")");
  }
  out_.raw(w_.str());
  out_.close();
  out_.blank();
}

std::string KernelEmitter::parameters(const std::vector<ValueId>& buffers, bool error_flag) const {
  std::string params;
  for (ValueId b : buffers) {
    const BufferPlan::Slot& slot = plan_.slot[b];
    bool writes = slot.kind == BufferKind::output || slot.kind == BufferKind::arena;
    params += std::string(params.empty() ? "" : ", ") + (writes ? "" : "const ") +
              storage_type(s_.graph.meta(b).dtype) + "* __restrict__ b" + std::to_string(b);
  }
  if (error_flag) params += std::string(params.empty() ? "" : ", ") + "int* zc_err";
  return params;
}

void KernelEmitter::emit(int32_t k, const Launch& launch) {
  emit_function(k, launch, false);
}

void KernelEmitter::emit_pack(int32_t first, const std::vector<Launch>& launches) {
  const Launch& lead = launches[first];
  const Launch::Pack& pack = *lead.pack;
  for (int32_t m : pack.members) emit_function(m, launches[m], true);
  // Block b goes to the member whose range [end of the one before, its end) holds it.
  out_.open("extern \"C\" __global__ void __launch_bounds__(" +
            std::to_string(lead.block_x * lead.block_y) + ") " + pack_symbol(first) + "(" +
            parameters(pack.buffers, pack.error_flag) + ", const ZcPackEnds zc_ends)");
  out_.line("const unsigned zc_b = blockIdx.x;");
  for (size_t i = 0; i < pack.members.size(); ++i) {
    const Launch& l = launches[pack.members[i]];
    const std::string lo =
        i == 0 ? std::string("0u") : "zc_ends.v[" + str(static_cast<int64_t>(i) - 1) + "]";
    const std::string hi = "zc_ends.v[" + str(static_cast<int64_t>(i)) + "]";
    std::string args;
    for (ValueId b : l.buffers) args += "b" + std::to_string(b) + ", ";
    if (l.error_flag) args += "zc_err, ";
    out_.open("if (zc_b < " + hi + ")");
    out_.line(l.symbol + "(" + args + "ZcGrid{zc_b - " + lo + ", blockIdx.y, blockIdx.z}, ZcGrid{" +
              hi + " - " + lo + ", gridDim.y, gridDim.z});");
    out_.line("return;");
    out_.close();
  }
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
