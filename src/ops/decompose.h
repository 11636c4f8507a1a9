// What the registry entries' decompositions share. A decomposition is ordinary tensor code on
// the public ops, so that the lowering stage can trace it; these helpers keep it free of
// nodes the eager kernel would not have computed.
#pragma once

#include <span>
#include <vector>

#include "ops/registry.h"
#include "zc/ops.h"

namespace zc::ops {

// t in `dtype`, recording no cast when it already has it.
inline Tensor to_dtype(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : cast(t, dtype);
}

// The dtype of op `id`'s output for these inputs, by the op's own shape rule, so that a
// decomposition cannot drift from the eager kernel's promotion.
inline DType output_dtype(OpId id, std::span<const Tensor> inputs, const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const Tensor& t : inputs) metas.push_back(meta_of(t));
  return infer_outputs(op_def(id), metas, attrs)[0].dtype;
}

}  // namespace zc::ops
