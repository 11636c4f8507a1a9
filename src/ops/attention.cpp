// Scaled dot-product attention: softmax(q k^T * scale [+ causal mask]) v, one batch matrix at
// a time (scores for one [Tq, Tk] block at once, as torch's math kernel does).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/blas.h"
#include "cpu/gemm.h"
#include "ops/attention.h"
#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "zc/factories.h"

namespace zc::ops {

Shape leading_dims(const Shape& s, size_t n) {
  return Shape(s.begin(), s.end() - static_cast<int64_t>(n));
}

Tensor attention_operand(const Tensor& t, const Shape& batch, size_t n, DType ct) {
  Shape target = batch;
  target.insert(target.end(), t.shape().end() - static_cast<int64_t>(n), t.shape().end());
  Tensor c = as_dtype(t, ct);
  if (c.shape() != target) c = c.expand(target);
  return eager_contiguous(c);
}

// The mask is computed now: traced, it enters the graph as a constant (which a compiled graph
// places on its device); eagerly on a GPU, it moves there.
Tensor attention_scores(const Tensor& q, const Tensor& k, bool causal, double scale, DType ct) {
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  if (!causal) return scores;
  int64_t tq = q.size(-2), tk = k.size(-2);
  Tensor mask = le(arange(tk).reshape({1, tk}), arange(tq).reshape({tq, 1}));
  if (!q.is_traced() && !q.device().is_cpu()) mask = mask.to(q.device());
  return where(mask, scores, full({}, -std::numeric_limits<double>::infinity(), ct));
}

namespace {

Shape batch_of(const Shape& s) {
  return leading_dims(s, 2);
}

std::vector<TensorMeta> attention_infer(std::span<const TensorMeta> in, const Attrs&) {
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  if (q.shape.size() < 2 || k.shape.size() < 2 || v.shape.size() < 2) {
    op_error("scaled_dot_product_attention",
             "q, k and v need shape [..., T, head_dim], got " + metas_str(in));
  }
  int64_t hd = q.shape.back();
  if (k.shape.back() != hd || k.shape[k.shape.size() - 2] != v.shape[v.shape.size() - 2]) {
    op_error("scaled_dot_product_attention",
             "q " + meta_str(q) + ", k " + meta_str(k) + ", v " + meta_str(v) +
                 ": expected k's last dim to equal q's and k, v to have the same length");
  }
  Shape batch = broadcast_shapes(
      "scaled_dot_product_attention",
      broadcast_shapes("scaled_dot_product_attention", batch_of(q.shape), batch_of(k.shape)),
      batch_of(v.shape));
  Shape out = batch;
  out.push_back(q.shape[q.shape.size() - 2]);
  out.push_back(v.shape.back());
  return {TensorMeta{out, floating_dtype(result_dtype(in)), q.device}};
}

template <class T>
void attend(const T* q, const T* k, const T* v, T* o, int64_t tq, int64_t tk, int64_t hd,
            int64_t hv, bool causal, T scale, std::vector<T>& scores) {
  scores.resize(tq * tk);
  // scores = q k^T: k [tk, hd] read transposed through strides.
  cpu::gemm<T>(tq, tk, hd, cpu::MatView{q, hd, 1}, cpu::MatView{k, 1, hd}, scores.data());
  for (int64_t i = 0; i < tq; ++i) {
    T* row = scores.data() + i * tk;
    int64_t visible = causal ? std::min(tk, i + 1) : tk;  // top-left aligned, as torch
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < visible; ++j) {
      row[j] *= scale;
      m = row[j] > m ? row[j] : m;
    }
    double sum = 0;
    for (int64_t j = 0; j < visible; ++j) {
      row[j] = std::exp(row[j] - m);
      sum += row[j];
    }
    T inv = static_cast<T>(1.0 / sum);
    for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
    for (int64_t j = visible; j < tk; ++j) row[j] = 0;
  }
  cpu::gemm<T>(tq, hv, tk, cpu::MatView{scores.data(), tk, 1}, cpu::MatView{v, hv, 1}, o);
}

std::vector<Tensor> attention_eager(std::span<const Tensor> in, const Attrs& attrs,
                                    std::span<const TensorMeta> outs) {
  const auto& a = std::get<AttentionAttrs>(attrs);
  DType ct = compute_dtype(outs[0].dtype);
  const Shape& out_shape = outs[0].shape;
  const Shape batch = batch_of(out_shape);
  Tensor q = attention_operand(in[0], batch, 2, ct), k = attention_operand(in[1], batch, 2, ct);
  Tensor v = attention_operand(in[2], batch, 2, ct);
  int64_t tq = q.shape()[q.dim() - 2], hd = q.shape().back();
  int64_t tk = k.shape()[k.dim() - 2], hv = v.shape().back();
  int64_t batches = shape_numel(batch);
  Tensor out = Tensor::empty(out_shape, ct);
  // Heads run one per thread when there are enough of them (cpu/blas.h's rule for batches of
  // products), each with its own scores; else one after another, each product on all threads.
  const bool spread = cpu::share_batch_out(batches, tq * tk * std::max(hd, hv));
  auto run = [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel if (spread)
    {
      std::vector<T> scores;
#pragma omp for schedule(static)
      for (int64_t b = 0; b < batches; ++b) {
        attend<T>(elem_ptr<T>(q) + b * tq * hd, elem_ptr<T>(k) + b * tk * hd,
                  elem_ptr<T>(v) + b * tk * hv, elem_ptr<T>(out) + b * tq * hv, tq, tk, hd, hv,
                  a.causal, static_cast<T>(a.scale), scores);
      }
    }
  };
  visit_float_compute(ct, run);
  return {as_dtype(out, outs[0].dtype)};
}

// The same steps as a graph of ops; matmul broadcasts the batch dims as the eager kernel
// expands them.
std::vector<Tensor> attention_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<AttentionAttrs>(attrs);
  DType out = output_dtype(OpId::attention, in, attrs);
  DType ct = compute_dtype(out);
  Tensor q = to_dtype(in[0], ct), k = to_dtype(in[1], ct), v = to_dtype(in[2], ct);
  return {to_dtype(matmul(softmax(attention_scores(q, k, a.causal, a.scale, ct), -1), v), out)};
}

// In the shape of FlashAttention's backward (attention_grad.cpp): the probabilities are not
// saved but recomputed, from q, k and each query row's log-sum-exp of scores, by fused ops that
// a GPU runs as a few kernels with no [Tq, Tk] matrix in memory (and the CPU through their
// decompositions). delta = sum(g * o, -1), the softmax backward's row term, comes from the
// forward's output. k's and v's gradients, when both are wanted, are one op: one pass forms
// the probabilities both need.
std::vector<Tensor> attention_vjp(const VjpArgs& args) {
  const auto& a = std::get<AttentionAttrs>(args.attrs);
  const DType ct = compute_dtype(args.outputs[0].dtype());
  // Float operands go in as they are (the fused ops read 16-bit floats and convert, as the
  // forward does); integers become the compute type.
  auto operand = [&](const Tensor& t) { return is_floating(t.dtype()) ? t : to_dtype(t, ct); };
  const Tensor q = operand(args.inputs[0]), k = operand(args.inputs[1]);
  const Tensor v = operand(args.inputs[2]), g = out_grad(args);
  const Tensor lse = call1(OpId::attention_lse, {q, k}, a);
  const Tensor delta = sum(to_dtype(g, ct) * to_dtype(args.outputs[0], ct), {-1});
  auto grad = [&](AttentionWrt wrt) {
    return call1(OpId::attention_grad, {q, k, v, g, lse, delta},
                 AttentionGradAttrs{a.causal, a.scale, wrt});
  };
  std::vector<Tensor> out(3);
  if (args.wants(0)) out[0] = sum_to(grad(AttentionWrt::q), q.shape());
  if (args.wants(1) && args.wants(2)) {
    const Tensor kv = grad(AttentionWrt::kv);
    const int64_t last = kv.dim() - 1, hd = k.size(-1);
    out[1] = sum_to(kv.slice(last, 0, hd), k.shape());
    out[2] = sum_to(kv.slice(last, hd, kv.size(last)), v.shape());
  } else if (args.wants(1)) {
    out[1] = sum_to(grad(AttentionWrt::k), k.shape());
  } else if (args.wants(2)) {
    out[2] = sum_to(grad(AttentionWrt::v), v.shape());
  }
  return out;
}

}  // namespace

void define_attention_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::attention,
                 .min_inputs = 3,
                 .max_inputs = 3,
                 .attrs_index = attrs_index_of<AttentionAttrs>(),
                 .infer = attention_infer,
                 .eager = attention_eager,
                 .decompose = attention_decompose,
                 .derivative = attention_vjp});
}

}  // namespace zc::ops
