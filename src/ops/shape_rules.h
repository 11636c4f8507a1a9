// Helpers the per-op shape rules share: broadcasting, dim wrapping, type promotion, and the
// wording of their errors (op name, operands, what was expected).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "ops/registry.h"

namespace zc::ops {

// "[2,3] f32"
std::string meta_str(const TensorMeta& m);
// "[2,3] f32 and [4] f32"
std::string metas_str(std::span<const TensorMeta> ms);

[[noreturn]] void op_error(std::string_view op, const std::string& detail);

// Broadcast of two shapes, or a zc::Error naming op, both shapes and the first bad dim.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim);
// Normalized, sorted, unique dims; an empty list means every dim.
std::vector<int64_t> reduce_dims(std::string_view op, const std::vector<int64_t>& dims,
                                 int64_t ndim);

// Result dtype of operands under torch's rule. Operands fall in three tiers: tensors with
// dims, 0-dim tensors, and wrapped numbers (which count as f32, i64 or bool). A lower tier
// changes the result only when its category (bool < integer < floating) is higher.
DType result_dtype(std::span<const TensorMeta> ms);

// Float ops on integer or bool inputs compute in f32.
inline DType floating_dtype(DType t) {
  return is_floating(t) ? t : DType::f32;
}

// matmul's dimensions under numpy semantics (a 1-D operand is a row or column vector, batch
// dims broadcast): what the shape rule, the eager kernel and every code generator use. Raises
// zc::Error naming both shapes when they do not multiply.
struct MatmulShapes {
  Shape out;          // the product's shape
  Shape batch;        // the broadcast batch dims
  int64_t M, N, K;    // one product is [M, K] @ [K, N] (M = 1 for a 1-D left operand, N = 1
                      // for a 1-D right one)
  bool a_vec, b_vec;  // 1-D operands
};
MatmulShapes matmul_shapes(const Shape& a, const Shape& b);

// Whether reshaping (shape, strides) to `target` can share storage, and the strides if so.
bool reshape_strides(const Shape& shape, const Shape& strides, const Shape& target,
                     Shape* out_strides);

}  // namespace zc::ops
