// embedding (row gather), its backward (row scatter-add), cat, and index_copy (rows written at
// given positions: a KV cache's update).
#include <cstring>

#include "ops/decompose.h"
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"
#include "zc/factories.h"

namespace zc::ops {

namespace {

std::vector<TensorMeta> embedding_infer(std::span<const TensorMeta> in, const Attrs&) {
  const TensorMeta &w = in[0], &idx = in[1];
  if (w.shape.size() != 2) {
    op_error("embedding", "weight must be 2-D [num_embeddings, dim], got " + meta_str(w));
  }
  if (!is_integral(idx.dtype)) {
    op_error("embedding", "indices must be i32 or i64, got " + meta_str(idx));
  }
  Shape out = idx.shape;
  out.push_back(w.shape[1]);
  return {TensorMeta{out, w.dtype, w.device}};
}

std::vector<Tensor> embedding_eager(std::span<const Tensor> in, const Attrs&,
                                    std::span<const TensorMeta> outs) {
  Tensor w = eager_contiguous(in[0]);
  Tensor idx = eager_contiguous(as_dtype(in[1], DType::i64));
  int64_t rows = w.shape()[0], d = w.shape()[1];
  const int64_t* ip = elem_ptr<int64_t>(idx);
  int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (ip[i] < 0 || ip[i] >= rows) {
      op_error("embedding", "index " + std::to_string(ip[i]) + " is out of range for a table of " +
                                std::to_string(rows) + " rows (expected 0 to " +
                                std::to_string(rows - 1) + ")");
    }
  }
  Tensor out = Tensor::empty(outs[0].shape, w.dtype());
  size_t row_bytes = static_cast<size_t>(d) * dtype_size(w.dtype());
  const char* src = static_cast<const char*>(w.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * row_bytes, src + ip[i] * row_bytes, row_bytes);
  return {out};
}

// The weight's gradient; the indices have none.
std::vector<Tensor> embedding_vjp(const VjpArgs& args) {
  const Tensor &w = args.inputs[0], &idx = args.inputs[1];
  if (!args.wants(0)) return {Tensor(), Tensor()};
  return {ops::call1(OpId::embedding_backward, {out_grad(args), idx}, ShapeAttrs{w.shape()}),
          Tensor()};
}

// embedding_backward(g [..., d], indices [...]) -> [n, d]: row i is the sum of g's rows whose
// index is i. A composite, so every backend has it through the decomposition.
std::vector<TensorMeta> embedding_backward_infer(std::span<const TensorMeta> in,
                                                 const Attrs& attrs) {
  const Shape& table = std::get<ShapeAttrs>(attrs).shape;
  const TensorMeta &g = in[0], &idx = in[1];
  if (table.size() != 2 || !is_integral(idx.dtype) || g.shape.size() != idx.shape.size() + 1 ||
      !std::equal(idx.shape.begin(), idx.shape.end(), g.shape.begin()) ||
      g.shape.back() != table[1]) {
    op_error("embedding_backward", "expected a gradient [..., " +
                                       std::to_string(table.size() == 2 ? table[1] : 0) +
                                       "] and integer indices [...] for a table " +
                                       shape_str(table) + ", got " + metas_str(in));
  }
  return {TensorMeta{table, g.dtype, g.device}};
}

std::vector<Tensor> embedding_backward_eager(std::span<const Tensor> in, const Attrs&,
                                             std::span<const TensorMeta> outs) {
  DType ct = compute_dtype(outs[0].dtype);
  Tensor g = eager_contiguous(as_dtype(in[0], ct));
  Tensor idx = eager_contiguous(as_dtype(in[1], DType::i64));
  const int64_t rows = outs[0].shape[0], d = outs[0].shape[1], n = idx.numel();
  Tensor out = Tensor::empty(outs[0].shape, ct);
  const int64_t* ip = elem_ptr<int64_t>(idx);
  for (int64_t i = 0; i < n; ++i) {
    if (ip[i] < 0 || ip[i] >= rows) {
      op_error("embedding_backward", "index " + std::to_string(ip[i]) +
                                         " is out of range for a table of " + std::to_string(rows) +
                                         " rows");
    }
  }
  visit_dtype(ct, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      T* o = elem_ptr<T>(out);
      const T* gp = elem_ptr<T>(g);
      std::fill(o, o + rows * d, T(0));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < d; ++j) o[ip[i] * d + j] += gp[i * d + j];
      }
    }
  });
  return {as_dtype(out, outs[0].dtype)};
}

// One-hot rows times the gradient: [n, N] x [N, d], a product every backend has.
std::vector<Tensor> embedding_backward_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const Shape& table = std::get<ShapeAttrs>(attrs).shape;
  DType out = in[0].dtype();
  DType ct = compute_dtype(out);
  Tensor g = to_dtype(in[0], ct).reshape({-1, table[1]});
  Tensor idx = in[1].reshape({1, -1});
  Tensor one_hot = cast(eq(arange(table[0]).reshape({table[0], 1}), idx), ct);
  return {to_dtype(matmul(one_hot, g), out)};
}

std::vector<TensorMeta> cat_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  int64_t dim = std::get<DimAttrs>(attrs).dim;
  const TensorMeta& first = in[0];
  int64_t nd = static_cast<int64_t>(first.shape.size());
  if (nd == 0) op_error("cat", "zero-dimensional tensors cannot be concatenated");
  if (dim < 0 || dim >= nd) {
    op_error("cat", "dimension " + std::to_string(dim) + " is out of range for " + meta_str(first));
  }
  Shape out = first.shape;
  out[dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    bool ok = static_cast<int64_t>(s.size()) == nd;
    for (int64_t d = 0; ok && d < nd; ++d) ok = d == dim || s[d] == first.shape[d];
    if (!ok) {
      op_error("cat", "tensor " + std::to_string(i) + " " + meta_str(in[i]) +
                          " does not match tensor 0 " + meta_str(first) + " outside dimension " +
                          std::to_string(dim));
    }
    out[dim] += s[dim];
  }
  return {TensorMeta{out, result_dtype(in), first.device}};
}

std::vector<Tensor> cat_eager(std::span<const Tensor> in, const Attrs& attrs,
                              std::span<const TensorMeta> outs) {
  int64_t dim = std::get<DimAttrs>(attrs).dim;
  Tensor out = Tensor::empty(outs[0].shape, outs[0].dtype);
  int64_t at = 0;
  for (const Tensor& t : in) {
    int64_t len = t.shape()[dim];
    // Write each input through a strided view of the output: the elementwise loop does the
    // dtype conversion and any layout.
    Shape strides = out.strides();
    Tensor dst = Tensor::view_of(out.impl_ptr()->storage, t.shape(), strides,
                                 at * out.strides()[dim], out.dtype());
    auto plan = make_loop_plan<2>(t.shape(), {&dst, &t});
    visit_dtype(out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      visit_dtype(t.dtype(), [&](auto from_tag) {
        using From = decltype(from_tag);
        run_loop(plan, elem_ptr<To>(dst), std::tuple<const From*>(elem_ptr<From>(t)),
                 [](From v) { return convert_element<To>(v); });
      });
    });
    at += len;
  }
  return {out};
}

// Each input gets its own stretch of the gradient.
std::vector<Tensor> cat_vjp(const VjpArgs& args) {
  int64_t dim = std::get<DimAttrs>(args.attrs).dim;
  std::vector<Tensor> out(args.inputs.size());
  int64_t at = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    int64_t len = args.inputs[i].shape()[dim];
    if (args.wants(i)) out[i] = out_grad(args).slice(dim, at, at + len);
    at += len;
  }
  return out;
}

// index_copy(self, index, source), dim d: self with source's slice i at position index[i]
// along d (torch's index_copy). An index given twice keeps its first slice (torch leaves it
// open); an index out of [0, size) raises here, and in compiled code writes nothing
// (docs/generation.md).
std::vector<TensorMeta> index_copy_infer(std::span<const TensorMeta> in, const Attrs& attrs) {
  const int64_t dim = std::get<DimAttrs>(attrs).dim;
  const TensorMeta &self = in[0], &index = in[1], &source = in[2];
  const int64_t nd = static_cast<int64_t>(self.shape.size());
  if (dim < 0 || dim >= nd) {
    op_error("index_copy",
             "dimension " + std::to_string(dim) + " is out of range for " + meta_str(self));
  }
  if (index.shape.size() != 1 || !is_integral(index.dtype)) {
    op_error("index_copy", "expected a 1-D index of i32 or i64, got " + meta_str(index));
  }
  Shape want = self.shape;
  want[static_cast<size_t>(dim)] = index.shape[0];
  if (source.shape != want || source.dtype != self.dtype) {
    TensorMeta expected{want, self.dtype, self.device};
    op_error("index_copy", "expected a source " + meta_str(expected) + " for " + meta_str(self) +
                               " and " + std::to_string(index.shape[0]) + " indices along dim " +
                               std::to_string(dim) + ", got " + meta_str(source));
  }
  return {TensorMeta{self.shape, self.dtype, self.device}};
}

std::vector<Tensor> index_copy_eager(std::span<const Tensor> in, const Attrs& attrs,
                                     std::span<const TensorMeta> outs) {
  const int64_t dim = std::get<DimAttrs>(attrs).dim;
  const Tensor self = eager_contiguous(in[0]);
  const Tensor index = eager_contiguous(as_dtype(in[1], DType::i64));
  const Tensor source = eager_contiguous(in[2]);
  const Shape& shape = outs[0].shape;
  const int64_t len = shape[static_cast<size_t>(dim)], n = index.numel();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t* ip = elem_ptr<int64_t>(index);
  for (int64_t i = 0; i < n; ++i) {
    if (ip[i] < 0 || ip[i] >= len) {
      op_error("index_copy", "index " + std::to_string(ip[i]) + " is out of range for dim " +
                                 std::to_string(dim) + " of size " + std::to_string(len) +
                                 " (expected 0 to " + std::to_string(len - 1) + ")");
    }
  }
  Tensor out = Tensor::empty(shape, self.dtype());
  const size_t es = dtype_size(self.dtype());
  const size_t row = static_cast<size_t>(inner) * es;
  auto* dst = static_cast<char*>(out.raw_data());
  const auto* from = static_cast<const char*>(self.raw_data());
  const auto* src = static_cast<const char*>(source.raw_data());
  if (out.numel() > 0) std::memcpy(dst, from, static_cast<size_t>(out.numel()) * es);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = n - 1; i >= 0; --i) {  // the first of an index's slices written last
      std::memcpy(dst + static_cast<size_t>(o * len + ip[i]) * row,
                  src + static_cast<size_t>(o * n + i) * row, row);
    }
  }
  return {out};
}

// Every position p along dim takes the source slice of the first i with index[i] == p, or
// keeps self's: a match of positions against the indices, whose argmax along the indices is
// that first i, then a row gather and a select. The positions and indices are compared, not
// used as addresses: an index out of range matches nothing. The only constant is the positions
// (the buffer's length), so the graph of a step of n indices differs from another n only in
// sizes (size templates serve both). The select runs in self's own layout (the gathered rows
// are read through a view), so that the result is dense where self is: a KV cache's new value
// leaves its kernel in the buffer's layout, with no copy to put it there. A single index (n = 1:
// a decode step) needs no match: the slice is selected where the position equals the index.
std::vector<Tensor> index_copy_decompose(std::span<const Tensor> in, const Attrs& attrs) {
  const int64_t dim = std::get<DimAttrs>(attrs).dim;
  const Tensor &self = in[0], &source = in[2];
  const int64_t nd = self.dim(), len = self.size(dim), n = source.size(dim);
  std::vector<int64_t> front{dim};
  for (int64_t d = 0; d < nd; ++d) {
    if (d != dim) front.push_back(d);
  }
  std::vector<int64_t> back(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) back[static_cast<size_t>(front[static_cast<size_t>(d)])] = d;
  if (n == 0) return {self};
  if (n == 1) {
    // One index (a decode step's position): a select of the source slice, broadcast along dim,
    // where the position matches: one elementwise pass, no match, argmax or gather kernels.
    Shape at(static_cast<size_t>(nd), 1);
    at[static_cast<size_t>(dim)] = len;
    // The comparison over the whole shape (the positions broadcast), so that it fuses into the
    // select rather than being a kernel of its own.
    const Tensor hit = eq(arange(len).reshape(at).expand(self.shape()),
                          cast(in[1], DType::i64).reshape(Shape(static_cast<size_t>(nd), 1)));
    return {where(hit, source.expand(self.shape()), self)};
  }
  const Tensor index = cast(in[1], DType::i64).reshape({1, n});
  const Tensor match = cast(eq(arange(len).reshape({len, 1}), index), DType::i32);  // [len, n]
  const Tensor which = argmax(match, 1);                                            // [len]
  Shape hit_shape(static_cast<size_t>(nd), 1);
  hit_shape[static_cast<size_t>(dim)] = len;
  const Tensor hit = gt(amax(match, {1}), 0.0).reshape(hit_shape);
  const Tensor rows = source.permute(front).reshape({n, -1});
  Shape front_shape;
  for (int64_t d : front) front_shape.push_back(self.size(d));
  const Tensor taken = embedding(rows, which).reshape(front_shape).permute(back);
  return {where(hit, taken, self)};
}

}  // namespace

void define_gather_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::embedding,
                 .min_inputs = 2,
                 .max_inputs = 2,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = embedding_infer,
                 .eager = embedding_eager,
                 .derivative = embedding_vjp});
  t.define(OpDef{.id = OpId::embedding_backward,
                 .min_inputs = 2,
                 .max_inputs = 2,
                 .attrs_index = attrs_index_of<ShapeAttrs>(),
                 .infer = embedding_backward_infer,
                 .eager = embedding_backward_eager,
                 .decompose = embedding_backward_decompose});
  t.define(OpDef{.id = OpId::index_copy,
                 .min_inputs = 3,
                 .max_inputs = 3,
                 .attrs_index = attrs_index_of<DimAttrs>(),
                 .infer = index_copy_infer,
                 .eager = index_copy_eager,
                 .decompose = index_copy_decompose});
  t.define(OpDef{.id = OpId::cat,
                 .min_inputs = 1,
                 .max_inputs = -1,
                 .attrs_index = attrs_index_of<DimAttrs>(),
                 .infer = cat_infer,
                 .eager = cat_eager,
                 .derivative = cat_vjp});
}

}  // namespace zc::ops
