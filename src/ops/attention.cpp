// Scaled dot-product attention: softmax(q k^T * scale [+ causal mask] [+ mask]) v, one batch
// matrix at a time (scores for one [Tq, Tk] block at once, as torch's math kernel does).
//
// The optional fourth input is torch's attn_mask: broadcast to [batch..., Tq, Tk], a boolean
// one says which keys each query sees (false: none of its weight), a floating one is added to
// the scaled scores (-inf: unseen). A query row that sees no key gives zeros (as
// FlashAttention, where the math kernel's softmax of all -inf gives NaN).
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

// The mask (the fourth input): boolean or floating, [..., Tq | 1, Tk | 1] whose leading dims
// broadcast onto the output's batch without widening it.
void check_attention_mask(const TensorMeta& m, const Shape& batch, int64_t tq, int64_t tk) {
  const size_t r = m.shape.size();
  const bool rows_fit = r >= 2 && (m.shape[r - 2] == tq || m.shape[r - 2] == 1) &&
                        (m.shape[r - 1] == tk || m.shape[r - 1] == 1);
  const bool batch_fits = rows_fit && r - 2 <= batch.size() && [&] {
    for (size_t i = 0; i < r - 2; ++i) {
      const int64_t d = m.shape[i], b = batch[batch.size() - (r - 2) + i];
      if (d != b && d != 1) return false;
    }
    return true;
  }();
  if (m.dtype != DType::boolean && !is_floating(m.dtype)) {
    op_error("scaled_dot_product_attention",
             "attn_mask " + meta_str(m) +
                 ": expected a boolean mask (true: the key is seen) or a "
                 "floating one added to the scores");
  }
  if (!batch_fits) {
    Shape want = batch;
    want.push_back(tq);
    want.push_back(tk);
    op_error("scaled_dot_product_attention",
             "attn_mask " + meta_str(m) + ": expected a shape that broadcasts to " +
                 shape_str(want) + " (the scores [batch..., Tq, Tk])");
  }
}

std::vector<TensorMeta> attention_infer(std::span<const TensorMeta> in, const Attrs&) {
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  const std::span<const TensorMeta> qkv = in.first(3);
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
  const int64_t tq = q.shape[q.shape.size() - 2], tk = k.shape[k.shape.size() - 2];
  if (in.size() == 4) check_attention_mask(in[3], batch, tq, tk);
  Shape out = batch;
  out.push_back(tq);
  out.push_back(v.shape.back());
  return {TensorMeta{out, floating_dtype(result_dtype(qkv)), q.device}};
}

// The mask of one batch item, dense [tq, tk]: which keys each row sees, or what is added to
// its scores; neither when the op has no mask.
template <class T>
struct RowMask {
  const bool* keep = nullptr;
  const T* add = nullptr;
};

template <class T>
void attend(const T* q, const T* k, const T* v, T* o, int64_t tq, int64_t tk, int64_t hd,
            int64_t hv, bool causal, T scale, RowMask<T> mask, std::vector<T>& scores) {
  scores.resize(tq * tk);
  // scores = q k^T: k [tk, hd] read transposed through strides.
  cpu::gemm<T>(tq, tk, hd, cpu::MatView{q, hd, 1}, cpu::MatView{k, 1, hd}, scores.data());
  constexpr T kUnseen = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < tq; ++i) {
    T* row = scores.data() + i * tk;
    int64_t visible = causal ? std::min(tk, i + 1) : tk;  // top-left aligned, as torch
    T m = kUnseen;
    for (int64_t j = 0; j < visible; ++j) {
      T x = row[j] * scale;
      if (mask.keep && !mask.keep[i * tk + j]) x = kUnseen;
      if (mask.add) x += mask.add[i * tk + j];
      row[j] = x;
      m = x > m ? x : m;
    }
    if (m == kUnseen) visible = 0;  // sees no key: zeros
    double sum = 0;
    for (int64_t j = 0; j < visible; ++j) {
      row[j] = row[j] == kUnseen ? T(0) : std::exp(row[j] - m);
      sum += row[j];
    }
    T inv = static_cast<T>(1.0 / sum);
    for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
    for (int64_t j = visible; j < tk; ++j) row[j] = 0;
  }
  cpu::gemm<T>(tq, hv, tk, cpu::MatView{scores.data(), tk, 1}, cpu::MatView{v, hv, 1}, o);
}

// The mask (input 3) for the eager kernel: dense [batch..., tq, tk], boolean or in `ct`.
Tensor dense_mask(const Tensor& m, const Shape& batch, int64_t tq, int64_t tk, DType ct) {
  Shape full = batch;
  full.push_back(tq);
  full.push_back(tk);
  const Tensor t = m.dtype() == DType::boolean ? m : as_dtype(m, ct);
  return eager_contiguous(t.shape() == full ? t : t.expand(full));
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
  const Tensor mask = in.size() == 4 ? dense_mask(in[3], batch, tq, tk, ct) : Tensor();
  int64_t batches = shape_numel(batch);
  Tensor out = Tensor::empty(out_shape, ct);
  // Heads run one per thread when there are enough of them (cpu/blas.h's rule for batches of
  // products), each with its own scores; else one after another, each product on all threads.
  const bool spread = cpu::share_batch_out(batches, tq * tk * std::max(hd, hv));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    auto mask_of = [&](int64_t b) {
      RowMask<T> r;
      if (!mask.defined()) return r;
      if (mask.dtype() == DType::boolean) {
        r.keep = elem_ptr<bool>(mask) + b * tq * tk;
      } else {
        r.add = elem_ptr<T>(mask) + b * tq * tk;
      }
      return r;
    };
#pragma omp parallel if (spread)
    {
      std::vector<T> scores;
#pragma omp for schedule(static)
      for (int64_t b = 0; b < batches; ++b) {
        attend<T>(elem_ptr<T>(q) + b * tq * hd, elem_ptr<T>(k) + b * tk * hd,
                  elem_ptr<T>(v) + b * tk * hv, elem_ptr<T>(out) + b * tq * hv, tq, tk, hd, hv,
                  a.causal, static_cast<T>(a.scale), mask_of(b), scores);
      }
    }
  };
  visit_float_compute(ct, run);
  return {as_dtype(out, outs[0].dtype)};
}

// The attention weights of scaled scores `s` [.., Tq, Tk] (-inf where unseen): softmax over
// the keys, a row that sees no key all zeros. Without a mask every row sees a key (causal rows
// see at least their own position), so only a masked attention needs the row test.
Tensor attention_weights(const Tensor& s, bool masked) {
  if (!masked) return softmax(s, -1);
  const double lowest = s.dtype() == DType::f64 ? std::numeric_limits<double>::lowest()
                                                : std::numeric_limits<float>::lowest();
  const Tensor finite = maximum(s, lowest);  // exp(lowest - max) is 0 where a key is seen
  return softmax(finite, -1) * to_dtype(gt(amax(finite, {-1}, true), lowest), s.dtype());
}

// Scaled scores with the causal limit and the mask (input 3) applied, in `ct`.
Tensor masked_scores(std::span<const Tensor> in, const AttentionAttrs& a, DType ct) {
  Tensor s = attention_scores(to_dtype(in[0], ct), to_dtype(in[1], ct), a.causal, a.scale, ct);
  if (in.size() < 4) return s;
  if (in[3].dtype() == DType::boolean) {
    return where(in[3], s, full({}, -std::numeric_limits<double>::infinity(), ct));
  }
  return s + to_dtype(in[3], ct);
}

// The same steps as a graph of ops; matmul broadcasts the batch dims as the eager kernel
// expands them.
std::vector<Tensor> attention_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<AttentionAttrs>(attrs);
  DType out = output_dtype(OpId::attention, in, attrs);
  DType ct = compute_dtype(out);
  const Tensor p = attention_weights(masked_scores(in, a, ct), in.size() == 4);
  return {to_dtype(matmul(p, to_dtype(in[2], ct)), out)};
}

// A masked attention's gradients as the composite ops of its definition (the probabilities
// recomputed, the [Tq, Tk] matrices in memory): the fused backward below takes no mask. dS,
// the scores' gradient, is also an additive mask's.
std::vector<Tensor> masked_attention_vjp(const VjpArgs& args) {
  const auto& a = std::get<AttentionAttrs>(args.attrs);
  const DType ct = compute_dtype(args.outputs[0].dtype());
  const Tensor q = to_dtype(args.inputs[0], ct), k = to_dtype(args.inputs[1], ct);
  const Tensor v = to_dtype(args.inputs[2], ct), g = to_dtype(out_grad(args), ct);
  const Tensor p = attention_weights(masked_scores(args.inputs, a, ct), true);
  std::vector<Tensor> out(4);
  if (args.wants(2)) out[2] = sum_to(matmul(p.transpose(-2, -1), g), v.shape());
  const bool mask_grad = args.wants(3) && is_floating(args.inputs[3].dtype());
  if (!args.wants(0) && !args.wants(1) && !mask_grad) return out;
  const Tensor dp = matmul(g, v.transpose(-2, -1));
  const Tensor ds = p * (dp - sum(dp * p, {-1}, true));  // softmax's backward
  if (mask_grad) out[3] = sum_to(ds, args.inputs[3].shape());
  if (args.wants(0)) out[0] = sum_to(matmul(ds, k) * a.scale, q.shape());
  if (args.wants(1)) out[1] = sum_to(matmul(ds.transpose(-2, -1), q) * a.scale, k.shape());
  return out;
}

// In the shape of FlashAttention's backward (attention_grad.cpp): the probabilities are not
// saved but recomputed, from q, k and each query row's log-sum-exp of scores, by fused ops that
// a GPU runs as a few kernels with no [Tq, Tk] matrix in memory (and the CPU through their
// decompositions). delta = sum(g * o, -1), the softmax backward's row term, comes from the
// forward's output. k's and v's gradients, when both are wanted, are one op: one pass forms
// the probabilities both need.
std::vector<Tensor> attention_vjp(const VjpArgs& args) {
  if (args.inputs.size() == 4) return masked_attention_vjp(args);
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
                 .max_inputs = 4,
                 .attrs_index = attrs_index_of<AttentionAttrs>(),
                 .infer = attention_infer,
                 .eager = attention_eager,
                 .decompose = attention_decompose,
                 .derivative = attention_vjp});
}

}  // namespace zc::ops
