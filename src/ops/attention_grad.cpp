// The ops attention's derivative is made of (attention_vjp in attention.cpp), in the shape of
// FlashAttention's backward: the forward's probabilities are not saved but recomputed from q, k
// and each query row's log-sum-exp of scores, so that P = exp(S - lse) takes one pass over the
// keys:
//   attention_lse(q, k)                    [batch..., Tq]: lse_i = log(sum_j exp(S_ij)), with
//                                          S = q k^T * scale (causal: query i sees keys 0..i);
//                                          -inf for a row that sees no key (Tk = 0)
//   attention_grad(q, k, v, g, lse, delta) one of dq [batch..., Tq, d], dk [batch..., Tk, d],
//                                          dv [batch..., Tk, dv] or dk and dv side by side
//                                          [batch..., Tk, d + dv] (AttentionGradAttrs::wrt)
// where g is the gradient of the output o and delta_i = sum(g_i * o_i) (ordinary ops, in the
// derivative). With dP = g v^T and dS = P (dP - delta) (the softmax's backward, since
// sum_j P_ij dP_ij = g_i . o_i):
//   dq = scale dS k,   dk = scale dS^T q,   dv = P^T g.
// Outputs are in the compute type (f32 for 16-bit floats) with the broadcast batch of every
// operand. Each op has an eager kernel and a decomposition into products and elementwise ops,
// which backends without a fused kernel compile; neither has a derivative.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/gemm.h"
#include "ops/attention.h"
#include "ops/decompose.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "zc/factories.h"

namespace zc::ops {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// An operand of rank at least `rank`, or an error naming the op and every operand.
void need_rank(const char* op, const TensorMeta& m, size_t rank, const char* what,
               std::span<const TensorMeta> in) {
  if (m.shape.size() < rank) {
    op_error(op, std::string(what) + " has shape " + meta_str(m) + ", expected " + what +
                     (rank == 2 ? " [..., T, dim]" : " [..., T]") + "; got " + metas_str(in));
  }
}

int64_t at_back(const Shape& s, size_t i) {  // the i-th dim from the end, 1-based
  return s[s.size() - i];
}

DType compute_of(std::span<const TensorMeta> in) {
  return compute_dtype(floating_dtype(result_dtype(in)));
}

std::vector<TensorMeta> attention_lse_infer(std::span<const TensorMeta> in, const Attrs&) {
  const TensorMeta &q = in[0], &k = in[1];
  need_rank("attention_lse", q, 2, "q", in);
  need_rank("attention_lse", k, 2, "k", in);
  if (k.shape.back() != q.shape.back()) {
    op_error("attention_lse",
             "q " + meta_str(q) + ", k " + meta_str(k) + ": expected k's last dim to equal q's");
  }
  Shape out = broadcast_shapes("attention_lse", leading_dims(q.shape, 2), leading_dims(k.shape, 2));
  out.push_back(at_back(q.shape, 2));
  return {TensorMeta{out, compute_of(in), q.device}};
}

std::vector<TensorMeta> attention_grad_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<AttentionGradAttrs>(attrs);
  const TensorMeta &q = in[0], &k = in[1], &v = in[2], &g = in[3], &lse = in[4], &delta = in[5];
  const char* op = "attention_grad";
  need_rank(op, q, 2, "q", in);
  need_rank(op, k, 2, "k", in);
  need_rank(op, v, 2, "v", in);
  need_rank(op, g, 2, "g", in);
  need_rank(op, lse, 1, "lse", in);
  need_rank(op, delta, 1, "delta", in);
  const int64_t tq = at_back(q.shape, 2), tk = at_back(k.shape, 2), d = q.shape.back();
  const int64_t dv = v.shape.back();
  if (k.shape.back() != d || at_back(v.shape, 2) != tk || at_back(g.shape, 2) != tq ||
      g.shape.back() != dv || lse.shape.back() != tq || delta.shape.back() != tq) {
    op_error(op,
             "expected q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv], g [..., Tq, dv], "
             "lse [..., Tq] and delta [..., Tq]; got " +
                 metas_str(in));
  }
  Shape batch = leading_dims(q.shape, 2);
  for (const TensorMeta* m : {&k, &v, &g}) {
    batch = broadcast_shapes(op, batch, leading_dims(m->shape, 2));
  }
  for (const TensorMeta* m : {&lse, &delta}) {
    batch = broadcast_shapes(op, batch, leading_dims(m->shape, 1));
  }
  Shape out = batch;
  switch (a.wrt) {
    case AttentionWrt::q:
      out.insert(out.end(), {tq, d});
      break;
    case AttentionWrt::k:
      out.insert(out.end(), {tk, d});
      break;
    case AttentionWrt::v:
      out.insert(out.end(), {tk, dv});
      break;
    case AttentionWrt::kv:
      out.insert(out.end(), {tk, d + dv});
      break;
  }
  return {TensorMeta{out, compute_of(in), q.device}};
}

// The keys query row i sees: all, or (causal, top-left aligned) keys 0..i.
int64_t visible_keys(int64_t i, int64_t tk, bool causal) {
  return causal ? std::min(tk, i + 1) : tk;
}

template <class T>
void row_lse(const T* q, const T* k, T* lse, int64_t tq, int64_t tk, int64_t d, bool causal,
             T scale, std::vector<T>& scores) {
  scores.resize(tq * tk);
  cpu::gemm<T>(tq, tk, d, cpu::MatView{q, d, 1}, cpu::MatView{k, 1, d}, scores.data());
  for (int64_t i = 0; i < tq; ++i) {
    T* row = scores.data() + i * tk;
    const int64_t visible = visible_keys(i, tk, causal);
    // Scaled, then exponentiated after the row's maximum, as the forward's softmax does.
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < visible; ++j) {
      row[j] *= scale;
      m = row[j] > m ? row[j] : m;
    }
    double sum = 0;
    for (int64_t j = 0; j < visible; ++j) sum += std::exp(row[j] - m);
    lse[i] = visible == 0 ? -std::numeric_limits<T>::infinity()
                          : static_cast<T>(m + static_cast<T>(std::log(sum)));
  }
}

std::vector<Tensor> attention_lse_eager(std::span<const Tensor> in, const Attrs& attrs,
                                        std::span<const TensorMeta> outs) {
  const auto& a = std::get<AttentionAttrs>(attrs);
  const DType ct = outs[0].dtype;
  const Shape batch = leading_dims(outs[0].shape, 1);
  Tensor q = attention_operand(in[0], batch, 2, ct), k = attention_operand(in[1], batch, 2, ct);
  const int64_t tq = q.shape()[q.dim() - 2], d = q.shape().back(), tk = k.shape()[k.dim() - 2];
  Tensor out = Tensor::empty(outs[0].shape, ct);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> scores;
    for (int64_t b = 0; b < shape_numel(batch); ++b) {
      row_lse<T>(elem_ptr<T>(q) + b * tq * d, elem_ptr<T>(k) + b * tk * d,
                 elem_ptr<T>(out) + b * tq, tq, tk, d, a.causal, static_cast<T>(a.scale), scores);
    }
  };
  visit_float_compute(ct, run);
  return {out};
}

// One batch item's operands and result, dense.
template <class T>
struct GradItem {
  const T *q, *k, *v, *g, *lse, *delta;
  T* out;
};

template <class T>
void item_grad(const GradItem<T>& x, int64_t tq, int64_t tk, int64_t d, int64_t dv,
               const AttentionGradAttrs& a, std::vector<T>& p, std::vector<T>& ds,
               std::vector<T>& tmp) {
  const T scale = static_cast<T>(a.scale);
  p.resize(tq * tk);
  cpu::gemm<T>(tq, tk, d, cpu::MatView{x.q, d, 1}, cpu::MatView{x.k, 1, d}, p.data());  // S = q k^T
  for (int64_t i = 0; i < tq; ++i) {
    T* row = p.data() + i * tk;
    const int64_t visible = visible_keys(i, tk, a.causal);
    for (int64_t j = 0; j < visible; ++j) row[j] = std::exp(row[j] * scale - x.lse[i]);
    for (int64_t j = visible; j < tk; ++j) row[j] = 0;
  }
  if (a.wrt != AttentionWrt::v) {
    ds.resize(tq * tk);
    cpu::gemm<T>(tq, tk, dv, cpu::MatView{x.g, dv, 1}, cpu::MatView{x.v, 1, dv},
                 ds.data());  // dP = g v^T
    for (int64_t i = 0; i < tq * tk; ++i) ds[i] = p[i] * (ds[i] - x.delta[i / tk]);
  }
  auto scaled = [&](T* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] *= scale;
  };
  switch (a.wrt) {
    case AttentionWrt::q:
      cpu::gemm<T>(tq, d, tk, cpu::MatView{ds.data(), tk, 1}, cpu::MatView{x.k, d, 1}, x.out);
      scaled(x.out, tq * d);
      break;
    case AttentionWrt::k:
      cpu::gemm<T>(tk, d, tq, cpu::MatView{ds.data(), 1, tk}, cpu::MatView{x.q, d, 1}, x.out);
      scaled(x.out, tk * d);
      break;
    case AttentionWrt::v:
      cpu::gemm<T>(tk, dv, tq, cpu::MatView{p.data(), 1, tk}, cpu::MatView{x.g, dv, 1}, x.out);
      break;
    case AttentionWrt::kv: {
      // Each key's row: its d gradient columns of k, then its dv of v.
      tmp.resize(tk * (d + dv));
      T *dk = tmp.data(), *dvv = tmp.data() + tk * d;
      cpu::gemm<T>(tk, d, tq, cpu::MatView{ds.data(), 1, tk}, cpu::MatView{x.q, d, 1}, dk);
      scaled(dk, tk * d);
      cpu::gemm<T>(tk, dv, tq, cpu::MatView{p.data(), 1, tk}, cpu::MatView{x.g, dv, 1}, dvv);
      for (int64_t r = 0; r < tk; ++r) {
        std::memcpy(x.out + r * (d + dv), dk + r * d, sizeof(T) * d);
        std::memcpy(x.out + r * (d + dv) + d, dvv + r * dv, sizeof(T) * dv);
      }
      break;
    }
  }
}

std::vector<Tensor> attention_grad_eager(std::span<const Tensor> in, const Attrs& attrs,
                                         std::span<const TensorMeta> outs) {
  const auto& a = std::get<AttentionGradAttrs>(attrs);
  const DType ct = outs[0].dtype;
  const Shape batch = leading_dims(outs[0].shape, 2);
  Tensor q = attention_operand(in[0], batch, 2, ct), k = attention_operand(in[1], batch, 2, ct);
  Tensor v = attention_operand(in[2], batch, 2, ct), g = attention_operand(in[3], batch, 2, ct);
  Tensor lse = attention_operand(in[4], batch, 1, ct);
  Tensor delta = attention_operand(in[5], batch, 1, ct);
  const int64_t tq = q.shape()[q.dim() - 2], d = q.shape().back();
  const int64_t tk = k.shape()[k.dim() - 2], dv = v.shape().back();
  const int64_t out_rows = outs[0].shape[outs[0].shape.size() - 2];
  const int64_t out_cols = outs[0].shape.back();
  Tensor out = Tensor::empty(outs[0].shape, ct);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> p, ds, tmp;
    for (int64_t b = 0; b < shape_numel(batch); ++b) {
      GradItem<T> x{elem_ptr<T>(q) + b * tq * d,
                    elem_ptr<T>(k) + b * tk * d,
                    elem_ptr<T>(v) + b * tk * dv,
                    elem_ptr<T>(g) + b * tq * dv,
                    elem_ptr<T>(lse) + b * tq,
                    elem_ptr<T>(delta) + b * tq,
                    elem_ptr<T>(out) + b * out_rows * out_cols};
      item_grad<T>(x, tq, tk, d, dv, a, p, ds, tmp);
    }
  };
  visit_float_compute(ct, run);
  return {out};
}

// The output's metadata by the op's own shape rule.
TensorMeta output_meta(OpId id, std::span<const Tensor> in, const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  for (const Tensor& t : in) metas.push_back(meta_of(t));
  return infer_outputs(op_def(id), metas, attrs)[0];
}

// The same steps as ops: the row maximum taken out before the exponent, as the eager kernel.
std::vector<Tensor> attention_lse_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<AttentionAttrs>(attrs);
  const TensorMeta out = output_meta(OpId::attention_lse, in, attrs);
  const DType ct = out.dtype;
  // No key: nothing to take a maximum of.
  if (in[1].size(-2) == 0) return {full(out.shape, -kInf, ct)};
  Tensor q = to_dtype(in[0], ct), k = to_dtype(in[1], ct);
  Tensor s = attention_scores(q, k, a.causal, a.scale, ct);
  Tensor m = amax(s, {-1}, true);
  return {(m + log(sum(exp(s - m), {-1}, true))).squeeze(-1)};
}

std::vector<Tensor> attention_grad_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = std::get<AttentionGradAttrs>(attrs);
  const TensorMeta out = output_meta(OpId::attention_grad, in, attrs);
  const DType ct = out.dtype;
  Tensor q = to_dtype(in[0], ct), k = to_dtype(in[1], ct), v = to_dtype(in[2], ct);
  Tensor g = to_dtype(in[3], ct), lse = to_dtype(in[4], ct).unsqueeze(-1);
  Tensor delta = to_dtype(in[5], ct).unsqueeze(-1);
  // Masked scores are -inf, so their probabilities are exp(-inf) = 0.
  Tensor p = exp(attention_scores(q, k, a.causal, a.scale, ct) - lse);
  auto ds = [&] { return p * (matmul(g, v.transpose(-2, -1)) - delta); };
  auto dk = [&] { return matmul(ds().transpose(-2, -1), q) * a.scale; };
  auto dv = [&] { return matmul(p.transpose(-2, -1), g); };
  Tensor r;
  switch (a.wrt) {
    case AttentionWrt::q:
      r = matmul(ds(), k) * a.scale;
      break;
    case AttentionWrt::k:
      r = dk();
      break;
    case AttentionWrt::v:
      r = dv();
      break;
    case AttentionWrt::kv: {
      // Both sides broadcast to the one batch before they are put side by side.
      Tensor x = dk(), y = dv();
      Shape xs = out.shape, ys = out.shape;
      xs.back() = x.size(-1);
      ys.back() = y.size(-1);
      r = cat({x.shape() == xs ? x : x.expand(xs), y.shape() == ys ? y : y.expand(ys)}, -1);
      break;
    }
  }
  // Operands whose batch no product reads (lse, delta, v for dv) still broadcast the result.
  return {r.shape() == out.shape ? r : r.expand(out.shape)};
}

}  // namespace

void define_attention_grad_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::attention_lse,
                 .min_inputs = 2,
                 .max_inputs = 2,
                 .attrs_index = attrs_index_of<AttentionAttrs>(),
                 .infer = attention_lse_infer,
                 .eager = attention_lse_eager,
                 .decompose = attention_lse_decompose});
  t.define(OpDef{.id = OpId::attention_grad,
                 .min_inputs = 6,
                 .max_inputs = 6,
                 .attrs_index = attrs_index_of<AttentionGradAttrs>(),
                 .infer = attention_grad_infer,
                 .eager = attention_grad_eager,
                 .decompose = attention_grad_decompose});
}

}  // namespace zc::ops
