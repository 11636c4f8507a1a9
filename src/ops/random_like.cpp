// rand_like(x, seed): uniform values in [0, 1) of x's shape and floating dtype, element i (in
// row-major order) being Philox's draw for index i under `seed` (ops/philox.h); randn_like(x,
// seed) the same with standard normal values. x gives only the shape, dtype and device; its
// values are never read. They are how a compiled forward draws random numbers (zc::rand_like,
// randn_like, nn::Dropout in training mode): the capture makes `seed` an input of the graph that
// every call draws anew from the process generator (ir::InputKind::seed), so the graph is the
// same for every call and each call gets its own numbers; the eager kernel and both code
// generators compute the same values, and a backward that recomputes a mask from the seed gets
// the forward's mask (docs/adr/0039).
#include <cstdint>

#include "cpu/threads.h"
#include "ops/eager.h"
#include "ops/loops.h"
#include "ops/philox.h"
#include "ops/registry.h"
#include "ops/shape_rules.h"

namespace zc::ops {

namespace {

template <const char* Name>
std::vector<TensorMeta> draw_infer(std::span<const TensorMeta> in, const Attrs&) {
  if (!is_floating(in[0].dtype)) {
    op_error(Name, "draws floating values, got " + meta_str(in[0]) +
                       "; give it a floating tensor of the wanted shape");
  }
  if (in[1].dtype != DType::i64 || !in[1].shape.empty()) {
    op_error(Name, "its seed must be a 0-dim int64 tensor, got " + meta_str(in[1]));
  }
  TensorMeta out = in[0];
  out.wrapped_number = false;
  return {out};
}

template <float (*Draw)(uint64_t, uint64_t)>
std::vector<Tensor> draw_eager(std::span<const Tensor> in, const Attrs&,
                               std::span<const TensorMeta> outs) {
  const uint64_t seed = static_cast<uint64_t>(*elem_ptr<int64_t>(in[1]));
  Tensor out = Tensor::empty(outs[0].shape, DType::f32);
  float* p = elem_ptr<float>(out);
  const int64_t n = out.numel();
  cpu::parallel_for_if(n >= 65536, n,
                       [&](int64_t i) { p[i] = Draw(seed, static_cast<uint64_t>(i)); });
  return {as_dtype(out, outs[0].dtype)};
}

// Operands: x (unused), the seed, and the element's index (OpDef::reads_element_index).
template <const char* Helper>
std::string draw_c(const CExpr& e) {
  return std::string(Helper) + "((uint64_t)(" + e.in[1] + "), (uint64_t)(" + e.in[2] + "))";
}

constexpr char kRandLike[] = "rand_like", kRandnLike[] = "randn_like";
constexpr char kUniformHelper[] = "zc_rand_uniform", kNormalHelper[] = "zc_rand_normal";

template <const char* Name, float (*Draw)(uint64_t, uint64_t), const char* Helper>
OpDef draw_def(OpId id) {
  // No derivative: its values depend on no input differentiably, and autodiff stops there.
  // ComputeRule::cast hands the C expression its operands unconverted (the seed stays an
  // integer) and computes in the output's type.
  return OpDef{.id = id,
               .min_inputs = 2,
               .max_inputs = 2,
               .attrs_index = attrs_index_of<NoAttrs>(),
               .infer = draw_infer<Name>,
               .eager = draw_eager<Draw>,
               .compute = ComputeRule::cast,
               .c_expr = draw_c<Helper>,
               .stops_gradient = true,
               .reads_element_index = true};
}

}  // namespace

void define_random_ops(OpTable& t) {
  t.define(draw_def<kRandLike, philox_uniform, kUniformHelper>(OpId::rand_like));
  t.define(draw_def<kRandnLike, philox_normal, kNormalHelper>(OpId::randn_like));
}

}  // namespace zc::ops
