// The public op functions: argument normalization (dims, shapes, optional operands) and one
// registry call each. Normalizing here keeps attributes canonical for the capture stage.
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "ops/shape_rules.h"
#include "tensor/assign.h"
#include "tensor/element.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc {

using ops::call1;
using ops::OpId;

namespace {
Tensor binary(OpId id, const Tensor& a, const Tensor& b) {
  return call1(id, {a, b});
}
Tensor unary(OpId id, const Tensor& x) {
  return call1(id, {x});
}
Tensor reduce(OpId id, const char* name, const Tensor& x, const std::vector<int64_t>& dims,
              bool keepdim, int64_t correction = 0) {
  if (!x.defined()) throw Error(std::string(name) + ": input 0 is an undefined Tensor");
  return call1(id, {x},
               ops::ReduceAttrs{ops::reduce_dims(name, dims, x.dim()), keepdim, correction});
}
}  // namespace

Tensor wrap_scalar(double value) {
  // C++ cannot tell 2 from 2.0 once both arrive as double, so integral values wrap as
  // integers: an integer tensor times 2 stays integer, as x * 2 does in torch.
  Tensor t = std::nearbyint(value) == value && std::abs(value) < 9.0e15
                 ? scalar_tensor(value, DType::i64)
                 : scalar_tensor(value, DType::f64);
  t.unsafe_impl()->wrapped_number = true;
  return t;
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(OpId::add, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(OpId::sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(OpId::mul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(OpId::div, a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return binary(OpId::pow, a, b);
}
Tensor pow(const Tensor& a, double exponent) {
  return pow(a, wrap_scalar(exponent));
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(OpId::maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(OpId::minimum, a, b);
}
Tensor fmod(const Tensor& a, const Tensor& b) {
  return binary(OpId::fmod, a, b);
}
Tensor remainder(const Tensor& a, const Tensor& b) {
  return binary(OpId::remainder, a, b);
}
Tensor eq(const Tensor& a, const Tensor& b) {
  return binary(OpId::eq, a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary(OpId::ne, a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary(OpId::lt, a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary(OpId::le, a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary(OpId::gt, a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary(OpId::ge, a, b);
}
Tensor maximum(const Tensor& a, double b) {
  return maximum(a, wrap_scalar(b));
}
Tensor minimum(const Tensor& a, double b) {
  return minimum(a, wrap_scalar(b));
}
Tensor fmod(const Tensor& a, double b) {
  return fmod(a, wrap_scalar(b));
}
Tensor remainder(const Tensor& a, double b) {
  return remainder(a, wrap_scalar(b));
}
Tensor eq(const Tensor& a, double b) {
  return eq(a, wrap_scalar(b));
}
Tensor ne(const Tensor& a, double b) {
  return ne(a, wrap_scalar(b));
}
Tensor lt(const Tensor& a, double b) {
  return lt(a, wrap_scalar(b));
}
Tensor le(const Tensor& a, double b) {
  return le(a, wrap_scalar(b));
}
Tensor gt(const Tensor& a, double b) {
  return gt(a, wrap_scalar(b));
}
Tensor ge(const Tensor& a, double b) {
  return ge(a, wrap_scalar(b));
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return call1(OpId::where, {cond, a, b});
}

Tensor neg(const Tensor& x) {
  return unary(OpId::neg, x);
}
Tensor abs(const Tensor& x) {
  return unary(OpId::abs, x);
}
Tensor exp(const Tensor& x) {
  return unary(OpId::exp, x);
}
Tensor log(const Tensor& x) {
  return unary(OpId::log, x);
}
Tensor sqrt(const Tensor& x) {
  return unary(OpId::sqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  return unary(OpId::rsqrt, x);
}
Tensor tanh(const Tensor& x) {
  return unary(OpId::tanh, x);
}
Tensor sigmoid(const Tensor& x) {
  return unary(OpId::sigmoid, x);
}
Tensor relu(const Tensor& x) {
  return unary(OpId::relu, x);
}
Tensor erf(const Tensor& x) {
  return unary(OpId::erf, x);
}
Tensor floor(const Tensor& x) {
  return unary(OpId::floor, x);
}
Tensor ceil(const Tensor& x) {
  return unary(OpId::ceil, x);
}
Tensor round(const Tensor& x) {
  return unary(OpId::round, x);
}
Tensor trunc(const Tensor& x) {
  return unary(OpId::trunc, x);
}
Tensor sin(const Tensor& x) {
  return unary(OpId::sin, x);
}
Tensor cos(const Tensor& x) {
  return unary(OpId::cos, x);
}
Tensor asin(const Tensor& x) {
  return unary(OpId::asin, x);
}
Tensor acos(const Tensor& x) {
  return unary(OpId::acos, x);
}
Tensor atan(const Tensor& x) {
  return unary(OpId::atan, x);
}
Tensor gelu(const Tensor& x, GeluApprox approximate) {
  return call1(OpId::gelu, {x}, ops::GeluAttrs{approximate});
}
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  if (min && max && *min > *max) {
    throw Error("clamp: min " + std::to_string(*min) + " is greater than max " +
                std::to_string(*max));
  }
  return call1(OpId::clamp, {x}, ops::ClampAttrs{min, max});
}
Tensor cast(const Tensor& x, DType dtype) {
  return call1(OpId::cast, {x}, ops::CastAttrs{dtype});
}

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(OpId::sum, "sum", x, dims, keepdim);
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(OpId::mean, "mean", x, dims, keepdim);
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(OpId::amax, "amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(OpId::amin, "amin", x, dims, keepdim);
}
Tensor max(const Tensor& x) {
  return amax(x);
}
Tensor min(const Tensor& x) {
  return amin(x);
}
Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return amax(x, {dim}, keepdim);
}
Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  return amin(x, {dim}, keepdim);
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (dim) return reduce(OpId::argmax, "argmax", x, {*dim}, keepdim);
  // Without a dim torch indexes into the flattened tensor.
  Tensor flat = x.reshape({-1});
  Tensor r = reduce(OpId::argmax, "argmax", flat, {}, false);
  if (keepdim) r = r.reshape(Shape(x.dim(), 1));
  return r;
}
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  if (correction < 0)
    throw Error("var: correction must be >= 0, got " + std::to_string(correction));
  return reduce(OpId::var, "var", x, dims, keepdim, correction);
}

Tensor softmax(const Tensor& x, int64_t dim) {
  return call1(OpId::softmax, {x}, ops::DimAttrs{ops::wrap_dim("softmax", dim, x.dim())});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return call1(OpId::log_softmax, {x}, ops::DimAttrs{ops::wrap_dim("log_softmax", dim, x.dim())});
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  int64_t k = static_cast<int64_t>(normalized_shape.size());
  if (!x.defined()) throw Error("layer_norm: input is an undefined Tensor");
  Shape tail = x.dim() >= k ? Shape(x.shape().end() - k, x.shape().end()) : Shape{};
  if (k == 0 || x.dim() < k || tail != normalized_shape) {
    throw Error("layer_norm: normalized_shape " + shape_str(normalized_shape) +
                " does not match the trailing dims of the input " + shape_str(x.shape()));
  }
  if (!(eps >= 0)) throw Error("layer_norm: eps must be >= 0");
  std::vector<Tensor> in{x};
  if (weight.defined()) in.push_back(weight);
  if (bias.defined()) in.push_back(bias);
  return call1(OpId::layer_norm, in, ops::LayerNormAttrs{k, eps, weight.defined(), bias.defined()});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (bias.defined()) return call1(OpId::linear, {x, weight, bias});
  return call1(OpId::linear, {x, weight});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  return binary(OpId::matmul, a, b);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  return binary(OpId::embedding, weight, indices);
}

Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  if (!self.defined()) throw Error("index_copy: self is an undefined Tensor");
  const int64_t d = ops::wrap_dim("index_copy", dim, self.dim());
  return call1(OpId::index_copy, {self, index, source}, ops::DimAttrs{d});
}

void index_copy_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  const Tensor updated = index_copy(self, dim, index, source);
  if (self.is_traced()) {
    ops::OpInterceptor* tracer = ops::current_interceptor();
    if (!tracer) throw Error("index_copy_: a traced tensor was used outside its capture");
    tracer->update_in_place(self, updated);
    return;
  }
  if (updated.is_traced()) {
    throw Error(
        "index_copy_: forward() writes a traced value into a tensor that is not a "
        "registered buffer of the module (" +
        shape_str(self.shape()) +
        "); register it with register_buffer, so that the compiled graph updates it");
  }
  if (autograd::requires_grad(self)) {
    throw Error("index_copy_: " + shape_str(self.shape()) +
                " wants gradients; an in-place update of it would lose them (update a tensor "
                "that wants none, or use zc::index_copy)");
  }
  assign_values(self, updated);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("cat: expects at least one tensor");
  if (!tensors[0].defined()) throw Error("cat: input 0 is an undefined Tensor");
  int64_t d = ops::wrap_dim("cat", dim, tensors[0].dim());
  return call1(OpId::cat, tensors, ops::DimAttrs{d});
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("stack: expects at least one tensor");
  if (!tensors[0].defined()) throw Error("stack: input 0 is an undefined Tensor");
  int64_t d = ops::wrap_dim("stack", dim, tensors[0].dim() + 1);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined() || tensors[i].shape() != tensors[0].shape()) {
      throw Error("stack: tensor " + std::to_string(i) + " has shape " +
                  (tensors[i].defined() ? shape_str(tensors[i].shape()) : "undefined") +
                  ", expected " + shape_str(tensors[0].shape()) + " like tensor 0");
    }
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  if (split_size <= 0) {
    throw Error("split: split_size must be positive, got " + std::to_string(split_size));
  }
  int64_t d = ops::wrap_dim("split", dim, x.dim());
  int64_t n = x.shape()[d];
  std::vector<Tensor> out;
  for (int64_t s = 0; s < n; s += split_size)
    out.push_back(x.slice(d, s, std::min(n, s + split_size)));
  return out;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool is_causal, std::optional<double> scale) {
  if (!q.defined() || q.dim() < 1) {
    throw Error("scaled_dot_product_attention: q must be a tensor [..., T, head_dim]");
  }
  double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.shape().back()));
  return call1(OpId::attention, {q, k, v}, ops::AttentionAttrs{is_causal, s});
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  if (!q.defined() || q.dim() < 1 || !k.defined() || !v.defined()) {
    throw Error("scaled_dot_product_attention: q, k and v must be tensors [..., T, head_dim]");
  }
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.shape().back()));
  auto attend = [&](const Tensor& rows, const Tensor& mask, bool causal) {
    const ops::AttentionAttrs attrs{causal, s};
    return mask.defined() ? call1(OpId::attention, {rows, k, v, mask}, attrs)
                          : call1(OpId::attention, {rows, k, v}, attrs);
  };
  const int64_t heads = q.dim() >= 3 ? q.size(-3) : 1;
  const int64_t kv_heads = k.dim() >= 3 ? k.size(-3) : 1;
  if (!enable_gqa || heads == kv_heads) return attend(q, attn_mask, is_causal);
  if (q.dim() < 3 || k.dim() != q.dim() || v.dim() != q.dim() || v.size(-3) != kv_heads ||
      kv_heads == 0 || heads % kv_heads != 0) {
    throw Error(
        "scaled_dot_product_attention: enable_gqa takes q [..., H, Tq, d] and k, v "
        "[..., Hkv, Tk, d] of q's rank with H a multiple of Hkv, got q " +
        shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape()));
  }
  // The queries of the `group` heads that share a key-value head are rows of one attention
  // against it: keys and values are read in place, never repeated (torch repeats them).
  const int64_t group = heads / kv_heads, tq = q.size(-2);
  Shape lead(q.shape().begin(), q.shape().end() - 3);
  auto grouped = [&](Shape tail) {
    Shape s = lead;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  const Tensor rows = q.reshape(grouped({kv_heads, group * tq, q.size(-1)}));
  Tensor mask = attn_mask;
  if (is_causal) {
    // The op's causal limit would count a group's rows as positions: a mask instead.
    const int64_t tk = k.size(-2);
    Tensor causal = le(arange(tk).reshape({1, tk}), arange(tq).reshape({tq, 1}));
    if (!q.is_traced() && !q.device().is_cpu()) causal = causal.to(q.device());
    if (!mask.defined()) {
      mask = causal;
    } else if (mask.dtype() == DType::boolean) {
      mask = where(causal, mask, causal);  // both
    } else {
      mask = where(causal, mask, full({}, -std::numeric_limits<double>::infinity(), mask.dtype()));
    }
  }
  if (mask.defined()) {
    // Each row of a group sees what its query does: the mask's head dim (1 or H) as (Hkv,
    // group), merged with its query rows.
    if (mask.dim() < 2) {
      throw Error("scaled_dot_product_attention: attn_mask must be [..., Tq, Tk], got " +
                  shape_str(mask.shape()));
    }
    const int64_t mq = mask.size(-2), mk = mask.size(-1);
    Shape full = grouped({heads, mq == 1 ? tq : mq, mk});
    if (mask.dim() > q.dim()) {
      throw Error("scaled_dot_product_attention: attn_mask " + shape_str(mask.shape()) +
                  " has more dims than q " + shape_str(q.shape()));
    }
    try {
      mask = mask.expand(full);
    } catch (const Error&) {
      throw Error("scaled_dot_product_attention: attn_mask " + shape_str(attn_mask.shape()) +
                  ": expected a shape that broadcasts to " + shape_str(grouped({heads, tq, mk})) +
                  " (q's heads and queries)");
    }
    mask = mask.reshape(grouped({kv_heads, group * full[full.size() - 2], mk}));
  }
  const Tensor y = attend(rows, mask, false);
  return y.reshape(grouped({heads, tq, y.size(-1)}));
}

Tensor dropout(const Tensor& x, double p) {
  if (!(p >= 0 && p < 1)) throw Error("dropout: p must be in [0, 1), got " + std::to_string(p));
  if (p == 0) return x;
  Tensor keep = ge(rand_like(is_floating(x.dtype()) ? x : x.to(DType::f32)), wrap_scalar(p));
  return mul(where(keep, x, zeros({}, x.dtype())), wrap_scalar(1.0 / (1.0 - p)));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) {
    // Broadcast-compatible shapes compare like torch; anything else is a usage error.
    ops::broadcast_shapes("allclose", a.shape(), b.shape());
  }
  Tensor x = a.to(DType::f64), y = b.to(DType::f64);
  Tensor diff = abs(sub(x, y));
  Tensor tol = add(mul(abs(y), wrap_scalar(rtol)), wrap_scalar(atol));
  // NaN in either operand makes the comparison false, as in torch (equal_nan=false); equal
  // values, infinities of one sign included, are close.
  Tensor ok = where(eq(x, y), ones({}, DType::boolean), le(diff, tol));
  return sum(cast(ok, DType::i64)).item<int64_t>() == shape_numel(ok.shape());
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}
Tensor operator+(const Tensor& a, double b) {
  return add(a, wrap_scalar(b));
}
Tensor operator-(const Tensor& a, double b) {
  return sub(a, wrap_scalar(b));
}
Tensor operator*(const Tensor& a, double b) {
  return mul(a, wrap_scalar(b));
}
Tensor operator/(const Tensor& a, double b) {
  return div(a, wrap_scalar(b));
}
Tensor operator+(double a, const Tensor& b) {
  return add(wrap_scalar(a), b);
}
Tensor operator-(double a, const Tensor& b) {
  return sub(wrap_scalar(a), b);
}
Tensor operator*(double a, const Tensor& b) {
  return mul(wrap_scalar(a), b);
}
Tensor operator/(double a, const Tensor& b) {
  return div(wrap_scalar(a), b);
}

}  // namespace zc
