// The list of registered ops, in one place: ZC_OP(identifier, class). Each entry has exactly
// one OpDef (see registry.h), defined in the file of its class; the registry checks at start-up
// that every identifier got one.
#pragma once

#define ZC_FOR_EACH_OP(ZC_OP)                                                  \
  /* elementwise unary */                                                      \
  ZC_OP(neg, unary)                                                            \
  ZC_OP(abs, unary)                                                            \
  ZC_OP(exp, unary)                                                            \
  ZC_OP(log, unary)                                                            \
  ZC_OP(sqrt, unary)                                                           \
  ZC_OP(rsqrt, unary)                                                          \
  ZC_OP(tanh, unary)                                                           \
  ZC_OP(sigmoid, unary)                                                        \
  ZC_OP(relu, unary)                                                           \
  ZC_OP(gelu, unary)                                                           \
  ZC_OP(erf, unary)                                                            \
  ZC_OP(floor, unary)                                                          \
  ZC_OP(ceil, unary)                                                           \
  ZC_OP(round, unary)                                                          \
  ZC_OP(trunc, unary)                                                          \
  ZC_OP(sin, unary)                                                            \
  ZC_OP(cos, unary)                                                            \
  ZC_OP(asin, unary)                                                           \
  ZC_OP(acos, unary)                                                           \
  ZC_OP(atan, unary)                                                           \
  ZC_OP(clamp, unary)                                                          \
  ZC_OP(cast, unary)                                                           \
  /* elementwise binary (broadcasting) */                                      \
  ZC_OP(add, binary)                                                           \
  ZC_OP(sub, binary)                                                           \
  ZC_OP(mul, binary)                                                           \
  ZC_OP(div, binary)                                                           \
  ZC_OP(pow, binary)                                                           \
  ZC_OP(maximum, binary)                                                       \
  ZC_OP(minimum, binary)                                                       \
  ZC_OP(fmod, binary)                                                          \
  ZC_OP(remainder, binary)                                                     \
  ZC_OP(eq, binary)                                                            \
  ZC_OP(ne, binary)                                                            \
  ZC_OP(lt, binary)                                                            \
  ZC_OP(le, binary)                                                            \
  ZC_OP(gt, binary)                                                            \
  ZC_OP(ge, binary)                                                            \
  /* elementwise ternary */                                                    \
  ZC_OP(where, ternary)                                                        \
  /* elementwise random: values from a seed and each element's index */        \
  ZC_OP(rand_like, binary)                                                     \
  ZC_OP(randn_like, binary)                                                    \
  /* reductions */                                                             \
  ZC_OP(sum, reduction)                                                        \
  ZC_OP(mean, reduction)                                                       \
  ZC_OP(amax, reduction)                                                       \
  ZC_OP(amin, reduction)                                                       \
  ZC_OP(argmax, reduction)                                                     \
  ZC_OP(var, reduction)                                                        \
  /* layout: views where the strides allow, copies otherwise */                \
  ZC_OP(reshape, layout)                                                       \
  ZC_OP(permute, layout)                                                       \
  ZC_OP(expand, layout)                                                        \
  ZC_OP(slice, layout)                                                         \
  ZC_OP(copy, layout)                                                          \
  ZC_OP(detach, layout)                                                        \
  /* composite: one eager kernel now, a decomposition in the lowering stage */ \
  ZC_OP(matmul, composite)                                                     \
  ZC_OP(linear, composite)                                                     \
  ZC_OP(softmax, composite)                                                    \
  ZC_OP(log_softmax, composite)                                                \
  ZC_OP(layer_norm, composite)                                                 \
  ZC_OP(embedding, composite)                                                  \
  ZC_OP(embedding_backward, composite)                                         \
  ZC_OP(cat, composite)                                                        \
  ZC_OP(index_copy, composite)                                                 \
  ZC_OP(attention, composite)                                                  \
  ZC_OP(attention_lse, composite)                                              \
  ZC_OP(attention_grad, composite)                                             \
  ZC_OP(conv2d, composite)                                                     \
  ZC_OP(conv2d_nhwc, composite)                                                \
  ZC_OP(im2col, composite)                                                     \
  ZC_OP(max_pool2d, composite)                                                 \
  ZC_OP(avg_pool2d, composite)

namespace zc::ops {

enum class OpId : uint16_t {
#define ZC_OP_ENUM(name, cls) name,
  ZC_FOR_EACH_OP(ZC_OP_ENUM)
#undef ZC_OP_ENUM
      count
};
inline constexpr int kNumOps = static_cast<int>(OpId::count);

enum class OpClass : uint8_t { unary, binary, ternary, reduction, layout, composite };

}  // namespace zc::ops
