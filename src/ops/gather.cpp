// embedding (row gather) and cat.
#include <cstring>

#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"

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

}  // namespace

void define_gather_ops(OpTable& t) {
  t.define(OpDef{.id = OpId::embedding,
                 .min_inputs = 2,
                 .max_inputs = 2,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = embedding_infer,
                 .eager = embedding_eager});
  t.define(OpDef{.id = OpId::cat,
                 .min_inputs = 1,
                 .max_inputs = -1,
                 .attrs_index = attrs_index_of<DimAttrs>(),
                 .infer = cat_infer,
                 .eager = cat_eager});
}

}  // namespace zc::ops
