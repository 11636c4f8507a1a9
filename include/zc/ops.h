// Eager operations. Each free function is one entry of the op registry (or a thin composition
// of entries); called on traced tensors, the same call records a graph node instead of
// computing. Bad shapes or dtypes raise zc::Error naming the op, the operands and what was
// expected.
#pragma once

#include <optional>
#include <vector>

#include "zc/tensor.h"

namespace zc {

// Elementwise, with broadcasting and type promotion. Scalars act like 0-dim tensors that do
// not widen the tensor's dtype within its category (x_f16 * 2.0 stays f16).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give f32
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// The remainder of a / b: fmod's has the sign of a (the quotient truncated: C's fmod,
// torch.fmod), remainder's the sign of b (the quotient floored: Python's %, torch.remainder,
// numpy.mod; a zero result is signed as b). For integers a divisor of 0 gives 0, as numpy (torch
// raises); bool operands raise zc::Error.
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);  // comparisons give bool
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// Scalar right-hand sides, with the same promotion as wrap_scalar.
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);
Tensor fmod(const Tensor& a, double b);
Tensor remainder(const Tensor& a, double b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
enum class GeluApprox : uint8_t { none, tanh };
Tensor gelu(const Tensor& x, GeluApprox approximate = GeluApprox::none);
Tensor erf(const Tensor& x);
// To an integral value, in x's dtype: floor, ceil, round (halves to even, as torch.round and
// ONNX Round) and trunc. Integer and bool tensors are integral already and come back unchanged.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor sin(const Tensor& x);  // integers give f32, as exp
Tensor cos(const Tensor& x);
// The inverse trigonometric functions, float-valued as sin: asin and acos are NaN outside
// [-1, 1]; atan takes any x, to (-pi/2, pi/2).
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor cast(const Tensor& x, DType dtype);

// Reductions. An empty `dims` reduces over every dimension; negative dims count from the end.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x);  // of every element
Tensor min(const Tensor& x);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);  // values only
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
// Index (i64) of the first maximum; without a dim, into the flattened tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// correction 1 is the unbiased (Bessel) estimate, as in torch.var.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);

// Composite.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Normalizes over the last normalized_shape.size() dims; weight and bias are optional.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// x @ weight^T + bias, weight [out, in] as in torch.nn.Linear; bias optional.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// numpy/torch matmul semantics: 1-D operands, batched and broadcasting leading dims.
Tensor matmul(const Tensor& a, const Tensor& b);
// Rows of `weight` [n, d] gathered by integer `indices` of any shape: [..., d].
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// `self` with `source`'s slice i along `dim` at position index[i] (torch's index_copy): index is
// 1-D, i32 or i64, source is self's shape with index's length at dim, in self's dtype. An index
// given twice keeps its first slice; one out of range raises zc::Error.
Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
// The same, written into `self` (a contiguous tensor with values: a module's buffer, such as a
// KV cache). Inside a compiled forward() an update of a registered buffer is part of the graph
// and applied to the buffer once per call, after the graph ran; later reads in forward() see
// it (docs/generation.md, "State in compiled graphs").
void index_copy_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Chunks of `split_size` along dim (the last may be smaller), as views.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// softmax(q k^T * scale [+ causal mask]) v over [..., T, head_dim]; scale defaults to
// 1/sqrt(head_dim).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);
// With torch's attn_mask, broadcast to the scores [..., Tq, Tk]: boolean (true: the query sees
// the key) or floating (added to the scaled scores); a query that sees no key gives zeros. An
// undefined mask is none. enable_gqa: k and v have Hkv heads (dim -3) shared by groups of
// H / Hkv of q's H heads (grouped-query attention), read in place rather than repeated.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);
// Convolutional networks, over [N, C, H, W] (NCHW) as torch.nn.functional. A window argument
// of one number means both dims, of two (h, w); padding may also give four (top, left, bottom,
// right: ONNX's asymmetric pads). An empty stride means the window's size (pools).
// weight [C_out, C / groups, kh, kw]; bias [C_out] or undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
// Padding counts as -inf; it may be at most half the (dilated) window, as in torch.
Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {},
                  const std::vector<int64_t>& padding = {0},
                  const std::vector<int64_t>& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {},
                  const std::vector<int64_t>& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true);
// Averages over output_size {OH, OW} windows that cover H and W as evenly as torch's; {1, 1} is
// the global average pool.
Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<int64_t>& output_size);
// Normalizes dim 1 (channels) of x [N, C, ...]. In training, by the batch's statistics, and the
// running ones (when given) move by `momentum` (with the unbiased variance); else by the running
// statistics, as x * scale + shift per channel, which fuses into the producer's epilogue (a
// convolution's). weight and bias are optional. A traced (compiled) call in training mode with
// running statistics raises zc::Error: updating them is a side effect a graph does not hold.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

// Zeroes each element with probability p and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& x, double p);

bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// Operators on tensors and scalars.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// A 0-dim tensor standing for a Python-style scalar operand: it does not widen the other
// operand's dtype within the same category. An integral value (2.0) wraps as an integer, so
// int_tensor * 2.0 stays integer; a fractional one (2.5) makes it f32.
Tensor wrap_scalar(double value);

}  // namespace zc
