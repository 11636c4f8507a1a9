// rand_like(x, seed): uniform values in [0, 1) of x's shape and floating dtype, element i (in
// row-major order) being Philox's draw for index i under `seed` (ops/philox.h). x gives only
// the shape, dtype and device; its values are never read. It is how a compiled forward draws
// random numbers (zc::rand_like, nn::Dropout in training mode): the capture makes `seed` an
// input of the graph that every call draws anew from the process generator (ir::InputKind::seed),
// so the graph is the same for every call and each call gets its own numbers; the eager kernel
// and both code generators compute the same values, and a backward that recomputes a mask from
// the seed gets the forward's mask.
#include <cstdint>

#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/philox.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"

namespace zc::ops {

namespace {

std::vector<TensorMeta> rand_like_infer(std::span<const TensorMeta> in, const Attrs&) {
  if (!is_floating(in[0].dtype)) {
    op_error("rand_like", "draws floating values, got " + meta_str(in[0]) +
                              "; give it a floating tensor of the wanted shape");
  }
  if (in[1].dtype != DType::i64 || !in[1].shape.empty()) {
    op_error("rand_like", "its seed must be a 0-dim int64 tensor, got " + meta_str(in[1]));
  }
  TensorMeta out = in[0];
  out.wrapped_number = false;
  return {out};
}

std::vector<Tensor> rand_like_eager(std::span<const Tensor> in, const Attrs&,
                                    std::span<const TensorMeta> outs) {
  const uint64_t seed = static_cast<uint64_t>(*elem_ptr<int64_t>(in[1]));
  Tensor out = Tensor::empty(outs[0].shape, DType::f32);
  float* p = elem_ptr<float>(out);
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i) p[i] = philox_uniform(seed, static_cast<uint64_t>(i));
  return {as_dtype(out, outs[0].dtype)};
}

// Operands: x (unused), the seed, and the element's index (OpDef::reads_element_index).
std::string rand_like_c(const CExpr& e) {
  return "zc_rand_uniform((uint64_t)(" + e.in[1] + "), (uint64_t)(" + e.in[2] + "))";
}

}  // namespace

void define_random_ops(OpTable& t) {
  // No derivative: its values depend on no input differentiably, and autodiff stops there.
  // ComputeRule::cast hands the C expression its operands unconverted (the seed stays an
  // integer) and computes in the output's type.
  t.define(OpDef{.id = OpId::rand_like,
                 .min_inputs = 2,
                 .max_inputs = 2,
                 .attrs_index = attrs_index_of<NoAttrs>(),
                 .infer = rand_like_infer,
                 .eager = rand_like_eager,
                 .compute = ComputeRule::cast,
                 .c_expr = rand_like_c,
                 .stops_gradient = true,
                 .reads_element_index = true});
}

}  // namespace zc::ops
