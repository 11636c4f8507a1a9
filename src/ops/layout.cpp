// Layout ops. Eagerly they return views that share storage whenever the strides allow (the
// same rule as torch); reshape of a non-viewable layout and copy produce new storage.
#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/eager.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"

namespace zc::ops {

namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  return Tensor::view_of(base.impl_ptr()->storage, std::move(shape), std::move(strides), offset,
                         base.dtype());
}

std::vector<TensorMeta> reshape_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const Shape& target = std::get<ShapeAttrs>(attrs).shape;
  for (int64_t d : target) {
    if (d < 0) op_error("reshape", "target " + shape_str(target) + " has a negative dimension");
  }
  if (shape_numel(target) != shape_numel(in[0].shape)) {
    op_error("reshape", meta_str(in[0]) + " (" + std::to_string(shape_numel(in[0].shape)) +
                            " elements) cannot be reshaped to " + shape_str(target) + " (" +
                            std::to_string(shape_numel(target)) + " elements)");
  }
  return {TensorMeta{target, in[0].dtype, in[0].device}};
}

std::vector<Tensor> reshape_eager(std::span<const Tensor> in, const Attrs& attrs,
                                  std::span<const TensorMeta>) {
  const Shape& target = std::get<ShapeAttrs>(attrs).shape;
  const Tensor& x = in[0];
  Shape strides;
  if (reshape_strides(x.shape(), x.strides(), target, &strides)) {
    return {make_view(x, target, strides, x.storage_offset())};
  }
  Tensor c = eager_contiguous(x);
  return {make_view(c, target, contiguous_strides(target), c.storage_offset())};
}

std::vector<TensorMeta> permute_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& dims = std::get<PermuteAttrs>(attrs).dims;
  const Shape& s = in[0].shape;
  if (dims.size() != s.size()) {
    op_error("permute",
             shape_str(dims) + " is not a permutation of the dims of " + meta_str(in[0]));
  }
  std::vector<bool> seen(s.size(), false);
  Shape out(s.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d < 0 || d >= static_cast<int64_t>(s.size()) || seen[d]) {
      op_error("permute",
               shape_str(dims) + " is not a permutation of the dims of " + meta_str(in[0]));
    }
    seen[d] = true;
    out[i] = s[d];
  }
  return {TensorMeta{out, in[0].dtype, in[0].device}};
}

std::vector<Tensor> permute_eager(std::span<const Tensor> in, const Attrs& attrs,
                                  std::span<const TensorMeta>) {
  const auto& dims = std::get<PermuteAttrs>(attrs).dims;
  const Tensor& x = in[0];
  Shape shape(dims.size()), strides(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    shape[i] = x.shape()[dims[i]];
    strides[i] = x.strides()[dims[i]];
  }
  return {make_view(x, shape, strides, x.storage_offset())};
}

std::vector<TensorMeta> expand_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const Shape& target = std::get<ShapeAttrs>(attrs).shape;
  const Shape& s = in[0].shape;
  bool ok = target.size() >= s.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    int64_t have = s[i], want = target[target.size() - s.size() + i];
    ok = have == want || have == 1;
  }
  if (!ok) op_error("expand", meta_str(in[0]) + " cannot be expanded to " + shape_str(target));
  return {TensorMeta{target, in[0].dtype, in[0].device}};
}

std::vector<Tensor> expand_eager(std::span<const Tensor> in, const Attrs& attrs,
                                 std::span<const TensorMeta>) {
  const Shape& target = std::get<ShapeAttrs>(attrs).shape;
  const Tensor& x = in[0];
  size_t off = target.size() - x.shape().size();
  Shape strides(target.size(), 0);
  for (size_t i = 0; i < x.shape().size(); ++i) {
    strides[off + i] = x.shape()[i] == target[off + i] ? x.strides()[i] : 0;
  }
  return {make_view(x, target, strides, x.storage_offset())};
}

std::vector<TensorMeta> slice_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const auto& a = std::get<SliceAttrs>(attrs);
  const Shape& s = in[0].shape;
  if (a.dim < 0 || a.dim >= static_cast<int64_t>(s.size()) || a.step < 1 || a.start < 0 ||
      a.end < a.start || a.end > s[a.dim]) {
    op_error("slice", "dim " + std::to_string(a.dim) + " [" + std::to_string(a.start) + ":" +
                          std::to_string(a.end) + ":" + std::to_string(a.step) +
                          "] is out of range for " + meta_str(in[0]));
  }
  Shape out = s;
  out[a.dim] = (a.end - a.start + a.step - 1) / a.step;
  return {TensorMeta{out, in[0].dtype, in[0].device}};
}

std::vector<Tensor> slice_eager(std::span<const Tensor> in, const Attrs& attrs,
                                std::span<const TensorMeta> outs) {
  const auto& a = std::get<SliceAttrs>(attrs);
  const Tensor& x = in[0];
  Shape strides = x.strides();
  strides[a.dim] *= a.step;
  return {make_view(x, outs[0].shape, strides, x.storage_offset() + a.start * x.strides()[a.dim])};
}

std::vector<TensorMeta> copy_infer(std::span<const TensorMeta> in, const Attrs&) {
  return {in[0]};
}

std::vector<Tensor> copy_eager(std::span<const Tensor> in, const Attrs&,
                               std::span<const TensorMeta>) {
  return {eager_cast(in[0], in[0].dtype())};
}

// Values are immutable in the graph, so a copy is its input; but a copy of a number is a
// tensor (no op's result is a wrapped number), which an identity cast says.
std::vector<Tensor> copy_decompose(std::span<const Tensor> in, const Attrs&) {
  return {in[0].unsafe_impl()->wrapped_number ? cast(in[0], in[0].dtype()) : in[0]};
}

// Eagerly a view of all of its input (Tensor::detach records the op only when traced, where
// the graph must say where gradients stop); lowered, its input, as a copy is.
std::vector<Tensor> detach_eager(std::span<const Tensor> in, const Attrs&,
                                 std::span<const TensorMeta>) {
  const Tensor& x = in[0];
  return {make_view(x, x.shape(), x.strides(), x.storage_offset())};
}

// The derivatives of views move the gradient back to where each element came from.
std::vector<Tensor> reshape_vjp(const VjpArgs& a) {
  return {out_grad(a).reshape(a.inputs[0].shape())};
}

std::vector<Tensor> permute_vjp(const VjpArgs& a) {
  const auto& dims = std::get<PermuteAttrs>(a.attrs).dims;
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<int64_t>(i);
  return {out_grad(a).permute(inverse)};
}

std::vector<Tensor> expand_vjp(const VjpArgs& a) {
  return {sum_to(out_grad(a), a.inputs[0].shape())};
}

std::vector<Tensor> slice_vjp(const VjpArgs& a) {
  return {slice_backward(out_grad(a), a.inputs[0].shape()[std::get<SliceAttrs>(a.attrs).dim],
                         std::get<SliceAttrs>(a.attrs))};
}

std::vector<Tensor> copy_vjp(const VjpArgs& a) {
  return {out_grad(a)};
}

}  // namespace

void define_layout_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::reshape,
                 .attrs_index = attrs_index_of<ShapeAttrs>(),
                 .infer = reshape_infer,
                 .eager = reshape_eager,
                 .derivative = reshape_vjp});
  t.define(OpDef{.id = OpId::permute,
                 .attrs_index = attrs_index_of<PermuteAttrs>(),
                 .infer = permute_infer,
                 .eager = permute_eager,
                 .derivative = permute_vjp});
  t.define(OpDef{.id = OpId::expand,
                 .attrs_index = attrs_index_of<ShapeAttrs>(),
                 .infer = expand_infer,
                 .eager = expand_eager,
                 .derivative = expand_vjp});
  t.define(OpDef{.id = OpId::slice,
                 .attrs_index = attrs_index_of<SliceAttrs>(),
                 .infer = slice_infer,
                 .eager = slice_eager,
                 .derivative = slice_vjp});
  t.define(OpDef{.id = OpId::copy,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = copy_infer,
                 .eager = copy_eager,
                 .decompose = copy_decompose,
                 .derivative = copy_vjp});
  t.define(OpDef{.id = OpId::detach,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = copy_infer,
                 .eager = detach_eager,
                 .decompose = copy_decompose,
                 .stops_gradient = true});
}

// The gradient lands on the sliced positions, zeros elsewhere: with a step, each gradient
// element is followed by step-1 zeros (a new dim, flattened), then the whole is padded to the
// input's length.
Tensor slice_backward(const Tensor& grad, int64_t n, const SliceAttrs& s) {
  Tensor g = grad;
  const int64_t m = g.shape()[s.dim];
  auto zeros_along = [&](const Tensor& like, int64_t dim, int64_t len) {
    Shape shape = like.shape();
    shape[dim] = len;
    return zeros_like_on(like, shape);
  };
  if (s.step > 1 && m > 0) {
    Tensor col = g.unsqueeze(s.dim + 1);
    Shape flat = g.shape();
    flat[s.dim] = m * s.step;
    g = cat({col, zeros_along(col, s.dim + 1, s.step - 1)}, s.dim + 1).reshape(flat);
    g = g.slice(s.dim, 0, std::min(m * s.step, n - s.start));
  }
  const int64_t after = n - s.start - g.shape()[s.dim];
  std::vector<Tensor> parts;
  if (s.start > 0) parts.push_back(zeros_along(g, s.dim, s.start));
  parts.push_back(g);
  if (after > 0) parts.push_back(zeros_along(g, s.dim, after));
  return parts.size() == 1 ? g : cat(parts, s.dim);
}

}  // namespace zc::ops
