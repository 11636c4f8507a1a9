#include "codegen/backends/cuda/library_matmul.h"

#include <algorithm>

#include "ops/shape_rules.h"
#include "util/check.h"

namespace zc::codegen::cuda {

namespace {

bool library_dtype(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

// A matrix operand of `rows` x `cols` with strides (row, col): transposed or not, and its
// leading dimension, when one of its dims is unit-stride.
bool matrix_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, bool* trans,
                   int64_t* ld) {
  if ((col_stride == 1 || cols == 1) && (rows <= 1 || row_stride >= std::max<int64_t>(cols, 1))) {
    *trans = false;
    *ld = std::max<int64_t>(rows <= 1 ? cols : row_stride, std::max<int64_t>(cols, 1));
    return true;
  }
  if ((row_stride == 1 || rows == 1) && (cols <= 1 || col_stride >= std::max<int64_t>(rows, 1))) {
    *trans = true;
    *ld = std::max<int64_t>(cols <= 1 ? rows : col_stride, std::max<int64_t>(rows, 1));
    return true;
  }
  return false;
}

// The one stride that walks an operand's batch items in the order of C's (flattened) batch
// index: its batch strides must be all 0 (one matrix for every item) or nested as a dense
// batch would be (with size-1 dims free).
std::optional<int64_t> batch_stride(const Shape& batch, const Shape& strides) {
  bool all_zero = true;
  for (size_t j = 0; j < batch.size(); ++j)
    all_zero = all_zero && (batch[j] == 1 || strides[j] == 0);
  if (all_zero) return 0;
  std::optional<int64_t> inner;  // stride of the innermost dim of size > 1
  int64_t expect = -1;
  for (size_t j = batch.size(); j-- > 0;) {
    if (batch[j] == 1) continue;
    if (!inner) {
      inner = strides[j];
      expect = strides[j] * batch[j];
      if (*inner == 0) return std::nullopt;
    } else {
      if (strides[j] != expect) return std::nullopt;
      expect *= batch[j];
    }
  }
  return inner.value_or(0);
}

}  // namespace

std::optional<LibraryMatmul> library_matmul(const Schedule& s, const Kernel& k) {
  if (k.kind != KernelKind::matmul || !k.library) return std::nullopt;
  const ir::Node& n = s.graph.nodes[k.anchor];
  const ir::ValueId A = n.inputs[0], B = n.inputs[1], C = n.outputs[0];
  ZC_CHECK(s.at(C).state == ValueState::stored, "a library product is not stored");
  const ops::TensorMeta &am = s.graph.meta(A), &bm = s.graph.meta(B), &cm = s.graph.meta(C);
  if (am.dtype != bm.dtype || !library_dtype(am.dtype) || cm.dtype != am.dtype) return std::nullopt;
  // The operands' buffers: f16/bf16 under converting aliases of an f32 product (tensor-core
  // inputs, f32 accumulation and output).
  const DType a_type = s.graph.meta(s.base_of(A)).dtype, b_type = s.graph.meta(s.base_of(B)).dtype;
  if (a_type != b_type || !library_dtype(a_type)) return std::nullopt;
  const ops::MatmulShapes d = ops::matmul_shapes(am.shape, bm.shape);
  if (d.a_vec || d.b_vec || d.M == 0 || d.N == 0) return std::nullopt;
  const ValueView& av = s.at(A).view;
  const ValueView& bv = s.at(B).view;
  const ValueView& cv = s.at(C).view;
  LibraryMatmul lm;
  zc::cuda::GemmProblem& p = lm.problem;
  p.a = a_type;
  p.b = b_type;
  p.d = cm.dtype;
  p.M = d.M;
  p.N = d.N;
  p.K = d.K;
  const size_t ra = av.strides.size(), rb = bv.strides.size();
  if (!matrix_layout(d.M, d.K, av.strides[ra - 2], av.strides[ra - 1], &p.trans_a, &p.lda) ||
      !matrix_layout(d.K, d.N, bv.strides[rb - 2], bv.strides[rb - 1], &p.trans_b, &p.ldb)) {
    return std::nullopt;
  }
  // Each operand's strides over C's batch dims (0 where it broadcasts).
  const size_t nb = d.batch.size();
  auto batch_strides = [&](const Shape& shape, const Shape& strides) {
    Shape out(nb, 0);
    const size_t own = shape.size() - 2, off = nb - own;
    for (size_t j = 0; j < own; ++j) out[off + j] = shape[j] == 1 ? 0 : strides[j];
    return out;
  };
  auto sa = batch_stride(d.batch, batch_strides(am.shape, av.strides));
  auto sb = batch_stride(d.batch, batch_strides(bm.shape, bv.strides));
  if (!sa || !sb) return std::nullopt;
  p.batch = std::max<int64_t>(shape_numel(d.batch), 1);
  p.stride_a = *sa;
  p.stride_b = *sb;
  p.ldd = d.N;
  p.stride_d = d.M * d.N;
  // One matrix B for every item and A's items evenly spaced rows: one product of batch*M rows
  // (a Linear applied to [B, T, d] is one GEMM, as on the CPU).
  if (p.batch > 1 && p.stride_b == 0 && !p.trans_a && p.stride_a == d.M * p.lda) {
    p.M *= p.batch;
    p.batch = 1;
    p.stride_a = p.stride_d = 0;
  }
  lm.a = av.base;
  lm.b = bv.base;
  lm.d = cv.base;
  lm.a_offset = av.offset;
  lm.b_offset = bv.offset;
  lm.d_offset = cv.offset;
  return lm;
}

}  // namespace zc::codegen::cuda
