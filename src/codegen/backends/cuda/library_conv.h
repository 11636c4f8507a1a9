// Which extern kernels of a CUDA schedule are convolutions run by cuDNN (cuda/cudnn.h), and
// their problems: the backend keeps conv2d whole where cuDNN is found (Backend::native_ops), so
// each conv2d node, epilogue included (lower/channels_last.h: conv_epilogues), is an extern
// kernel of its own; this maps its operands' views onto cuDNN's strided descriptors. A function
// of the schedule alone, so the emitter and the loader agree.
#pragma once

#include <optional>

#include "codegen/kernel_ir.h"
#include "cuda/cudnn.h"

namespace zc::codegen::cuda {

struct LibraryConv {
  zc::cuda::ConvProblem problem;
  // The buffers holding x, w, the bias, the residual and y (-1 where absent), and the element
  // offset of each operand's first element.
  ir::ValueId x = -1, w = -1, bias = -1, residual = -1, y = -1;
  int64_t x_offset = 0, w_offset = 0, bias_offset = 0, residual_offset = 0, y_offset = 0;
};

// Kernel k's convolution: nullopt when it is not an extern conv2d. Raises zc::Error where
// cuDNN cannot take its operands as they lie (an operand whose buffer holds another dtype).
std::optional<LibraryConv> library_conv(const Schedule& s, const Kernel& k);

}  // namespace zc::codegen::cuda
