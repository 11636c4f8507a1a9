// matmul (numpy semantics: 1-D operands, broadcast batch dims) and linear (x W^T + b).
#include <algorithm>
#include <type_traits>

#include "cpu/bf16_gemm.h"
#include "cpu/blas.h"
#include "cpu/gemm.h"
#include "cpu/gemm_choice.h"
#include "cpu/threads.h"
#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"

namespace zc::ops {

namespace {

std::vector<TensorMeta> matmul_infer(std::span<const TensorMeta> in, const Attrs&) {
  MatmulShapes s = matmul_shapes(in[0].shape, in[1].shape);
  return {TensorMeta{s.out, result_dtype(in), in[0].device}};
}

// Views of a at [batch..., M, K] with broadcast batch strides (0 where broadcast).
struct BatchedOperand {
  const char* base;
  Shape strides;  // per batch dim, then row, col
};

BatchedOperand batched(const Tensor& t, bool vec_is_row, const Shape& batch) {
  Shape shape = t.shape(), strides = t.strides();
  if (shape.size() == 1) {
    if (vec_is_row) {
      shape.insert(shape.begin(), 1);
      strides.insert(strides.begin(), 0);
    } else {
      shape.push_back(1);
      strides.push_back(0);
    }
  }
  BatchedOperand op;
  op.base = static_cast<const char*>(t.raw_data());
  size_t nb = batch.size(), tb = shape.size() - 2;
  op.strides.assign(nb + 2, 0);
  for (size_t i = 0; i < tb; ++i) {
    if (shape[i] != 1) op.strides[nb - tb + i] = strides[i];
  }
  op.strides[nb] = strides[tb];
  op.strides[nb + 1] = strides[tb + 1];
  return op;
}

// C = A B for f32 views of bf16 values (an autocast product, zc/autocast.h): oneDNN's bf16
// GEMM (cpu/bf16_gemm.h: AMX or AVX-512 BF16, f32 sums) where this CPU has one, the size pays
// and the views are matrices BLAS reads; false (C untouched) otherwise. Rounding the operands to
// bf16 again changes nothing: they are bf16 values.
bool bf16_values_gemm(int64_t M, int64_t N, int64_t K, const cpu::MatView& a, const cpu::MatView& b,
                      float* c) {
  if (!cpu::bf16_pays(M, N, K)) return false;
  auto layout = [](const cpu::MatView& v, int64_t rows, int64_t cols, bool* t, int64_t* ld) {
    if (v.col_stride == 1 && v.row_stride >= std::max<int64_t>(cols, 1)) {
      *t = false;
      *ld = v.row_stride;
      return true;
    }
    if (v.row_stride == 1 && v.col_stride >= std::max<int64_t>(rows, 1)) {
      *t = true;
      *ld = v.col_stride;
      return true;
    }
    return false;
  };
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  if (!layout(a, M, K, &ta, &lda) || !layout(b, K, N, &tb, &ldb)) return false;
  return cpu::sgemm_bf16(ta, tb, M, N, K, static_cast<const float*>(a.data), lda,
                         static_cast<const float*>(b.data), ldb, c, N);
}

template <class T>
void gemm_of(int64_t M, int64_t N, int64_t K, const cpu::MatView& a, const cpu::MatView& b, T* c,
             bool bf16_values) {
  if constexpr (std::is_same_v<T, float>) {
    if (bf16_values && bf16_values_gemm(M, N, K, a, b, c)) return;
  }
  cpu::gemm<T>(M, N, K, a, b, c);
}

template <class T>
void batched_gemm(const MatmulShapes& s, const Tensor& a, const Tensor& b, Tensor& out,
                  bool bf16_values = false) {
  BatchedOperand A = batched(a, true, s.batch), B = batched(b, false, s.batch);
  int64_t nb = static_cast<int64_t>(s.batch.size());
  int64_t batches = shape_numel(s.batch);
  T* c = elem_ptr<T>(out);
  // The batch rule of generated code's products (cpu/blas.h): heads one per thread when
  // there are enough of them, else one product after another on all threads.
  cpu::parallel_for_if(cpu::share_batch_out(batches, s.M * s.N * s.K), batches, [&](int64_t bi) {
    int64_t rem = bi, oa = 0, ob = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      int64_t i = rem % s.batch[d];
      rem /= s.batch[d];
      oa += i * A.strides[d];
      ob += i * B.strides[d];
    }
    cpu::MatView av{reinterpret_cast<const T*>(A.base) + oa, A.strides[nb], A.strides[nb + 1]};
    cpu::MatView bv{reinterpret_cast<const T*>(B.base) + ob, B.strides[nb], B.strides[nb + 1]};
    gemm_of<T>(s.M, s.N, s.K, av, bv, c + bi * s.M * s.N, bf16_values);
  });
}

template <class Fn>
void visit_gemm_dtype(DType ct, Fn&& fn) {
  switch (ct) {
    case DType::f32:
      fn(float{});
      break;
    case DType::f64:
      fn(double{});
      break;
    case DType::i64:
      fn(int64_t{});
      break;
    case DType::i32:
      fn(int32_t{});
      break;
    default:
      ZC_CHECK(false, "no gemm for " << dtype_name(ct));
  }
}

DType gemm_dtype(DType t) {
  DType ct = compute_dtype(t);
  return ct == DType::boolean ? DType::i64 : ct;
}

std::vector<Tensor> matmul_eager(std::span<const Tensor> in, const Attrs&,
                                 std::span<const TensorMeta> outs) {
  MatmulShapes s = matmul_shapes(in[0].shape(), in[1].shape());
  DType ct = gemm_dtype(outs[0].dtype);
  Tensor a = as_dtype(in[0], ct), b = as_dtype(in[1], ct);
  Tensor out = Tensor::empty(outs[0].shape, ct);
  const bool bf16 = in[0].dtype() == DType::bf16 && in[1].dtype() == DType::bf16;
  visit_gemm_dtype(ct, [&](auto tag) { batched_gemm<decltype(tag)>(s, a, b, out, bf16); });
  return {as_dtype(out, outs[0].dtype)};
}

std::vector<TensorMeta> linear_infer(std::span<const TensorMeta> in, const Attrs&) {
  const TensorMeta &x = in[0], &w = in[1];
  if (x.shape.empty() || w.shape.size() != 2 || x.shape.back() != w.shape[1]) {
    op_error("linear", "input " + meta_str(x) + " and weight " + meta_str(w) +
                           ": expected weight [out, in] with in equal to the input's last "
                           "dimension");
  }
  if (in.size() == 3 && (in[2].shape.size() != 1 || in[2].shape[0] != w.shape[0])) {
    op_error("linear", "bias " + meta_str(in[2]) + " does not match weight " + meta_str(w) +
                           ": expected [" + std::to_string(w.shape[0]) + "]");
  }
  Shape out = x.shape;
  out.back() = w.shape[0];
  return {TensorMeta{out, result_dtype(in), x.device}};
}

std::vector<Tensor> linear_eager(std::span<const Tensor> in, const Attrs&,
                                 std::span<const TensorMeta> outs) {
  DType ct = gemm_dtype(outs[0].dtype);
  Tensor x = as_dtype(in[0], ct), w = as_dtype(in[1], ct);
  int64_t K = x.shape().back(), N = w.shape()[0];
  int64_t M = x.numel() / std::max<int64_t>(K, 1);
  if (K == 0) M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  // Rows of x as one [M, K] matrix: a view when the leading dims merge, else a copy.
  Shape rows_strides;
  if (!reshape_strides(x.shape(), x.strides(), {M, K}, &rows_strides)) {
    x = eager_contiguous(x);
    rows_strides = {K, 1};
  }
  Tensor out = Tensor::empty(outs[0].shape, ct);
  visit_gemm_dtype(ct, [&](auto tag) {
    using T = decltype(tag);
    T* c = elem_ptr<T>(out);
    if (K == 0) {
      for (int64_t i = 0; i < M * N; ++i) c[i] = T(0);
    } else {
      gemm_of<T>(M, N, K, cpu::MatView{elem_ptr<T>(x), rows_strides[0], rows_strides[1]},
                 cpu::MatView{elem_ptr<T>(w), w.strides()[1], w.strides()[0]}, c,
                 in[0].dtype() == DType::bf16 && in[1].dtype() == DType::bf16);
    }
    if (in.size() == 3) {
      Tensor b = as_dtype(in[2], ct);
      const T* bp = elem_ptr<T>(b);
      int64_t bs = b.strides()[0];
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) c[i * N + j] += bp[j * bs];
      }
    }
  });
  return {as_dtype(out, outs[0].dtype)};
}

// x W^T + b with x's leading dims flattened into rows, as the eager kernel computes it (one
// product, so the same summation order), in its compute type, rounded to the result once.
std::vector<Tensor> linear_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  DType out = output_dtype(OpId::linear, in, attrs);
  DType ct = gemm_dtype(out);
  // x keeps its leading dims (a batched matmul with W^T broadcast) rather than being
  // flattened to 2-D: the epilogue after a Linear (bias, activation, residual) then has the
  // matmul's own shape and fuses into it. The code generator merges the batch into one GEMM
  // when the layout allows, as the eager kernel does.
  Tensor x = to_dtype(in[0], ct), w = to_dtype(in[1], ct);
  Tensor y = matmul(x, w.t());
  // The bias joins uncast: the add promotes it to ct (it is no wider than ct) and reads it
  // converting, inside the product's epilogue; a cast of the [N] bias would be a kernel of its
  // own, since it does not have the epilogue's iteration space.
  if (in.size() == 3) y = y + in[2];
  return {to_dtype(y, out)};
}

// 1-D operands become matrices (a row, a column) and g gets the dims they dropped back, so
// every case is the batched one: dA = g B^T and dB = A^T g, summed over broadcast batch dims.
std::vector<Tensor> matmul_vjp(const VjpArgs& args) {
  const Tensor &a = args.inputs[0], &b = args.inputs[1];
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(-1) : b;
  Tensor g = out_grad(args);
  if (b.dim() == 1) g = g.unsqueeze(-1);
  if (a.dim() == 1) g = g.unsqueeze(-2);
  std::vector<Tensor> out(2);
  if (args.wants(0)) {
    out[0] = sum_to(matmul(g, b2.transpose(-1, -2)), a2.shape()).reshape(a.shape());
  }
  if (args.wants(1)) {
    out[1] = sum_to(matmul(a2.transpose(-1, -2), g), b2.shape()).reshape(b.shape());
  }
  return out;
}

// y = x W^T + b: dx = g W, dW = g^T x over every row of the batch, db = g summed over rows.
std::vector<Tensor> linear_vjp(const VjpArgs& args) {
  const Tensor &x = args.inputs[0], &w = args.inputs[1];
  const Tensor& g = out_grad(args);
  const int64_t out_features = w.shape()[0];
  std::vector<Tensor> out(args.inputs.size());
  if (args.wants(0)) out[0] = matmul(g, w);
  if (args.wants(1)) {
    out[1] = matmul(g.reshape({-1, out_features}).t(), x.reshape({-1, x.shape().back()}));
  }
  if (args.inputs.size() == 3 && args.wants(2)) out[2] = sum_to(g, args.inputs[2].shape());
  return out;
}

}  // namespace

void define_matmul_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::matmul,
                 .min_inputs = 2,
                 .max_inputs = 2,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = matmul_infer,
                 .eager = matmul_eager,
                 .derivative = matmul_vjp});
  t.define(OpDef{.id = OpId::linear,
                 .min_inputs = 2,
                 .max_inputs = 3,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = linear_infer,
                 .eager = linear_eager,
                 .decompose = linear_decompose,
                 .derivative = linear_vjp});
}

}  // namespace zc::ops
