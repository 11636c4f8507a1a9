// The calling convention between the runtime and generated C++ kernels. The same text is
// compiled into libzc and pasted into every generated source, so the two cannot drift apart.
#pragma once

#include <cstdint>

#include "ops/epilogue_act.h"

#define ZC_ABI_DEFINITIONS                                                                     \
  struct ZcArgs;                                                                               \
  /* C = act(C + bias[col] + residual[row * ldr + col]); act an EpilogueAct: 0 none, */        \
  /* 1 relu, 2 gelu (tanh), 3 gelu (erf); a null pointer adds nothing */                       \
  struct ZcEpilogue {                                                                          \
    const float* bias;                                                                         \
    const float* residual;                                                                     \
    int64_t ldr;                                                                               \
    int act;                                                                                   \
  };                                                                                           \
  /* each product's first argument: how it runs (cpu/gemm_choice.h; 0: the default) */         \
  struct ZcServices {                                                                          \
    void (*sgemm)(int choice, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,       \
                  const float* a, int64_t lda, const float* b, int64_t ldb, float* c,          \
                  int64_t ldc);                                                                \
    void (*dgemm)(int choice, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,       \
                  const double* a, int64_t lda, const double* b, int64_t ldb, double* c,       \
                  int64_t ldc);                                                                \
    /* a batch of products: batch = {ndim, then per dim: count, stride of a, b and c} */       \
    void (*sgemm_batch)(int choice, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, \
                        const float* a, int64_t lda, const float* b, int64_t ldb, float* c,    \
                        int64_t ldc, const int64_t* batch);                                    \
    void (*dgemm_batch)(int choice, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, \
                        const double* a, int64_t lda, const double* b, int64_t ldb, double* c, \
                        int64_t ldc, const int64_t* batch);                                    \
    /* one f32 product and its epilogue (null: none), run as kernel's choice says */           \
    /* (a->gemm[kernel]): fused, and its B kept packed across calls where chosen */            \
    void (*sgemm_x)(const struct ZcArgs* a, int kernel, int trans_a, int trans_b, int64_t m,   \
                    int64_t n, int64_t k, const float* a_, int64_t lda, const float* b,        \
                    int64_t ldb, float* c, int64_t ldc, const struct ZcEpilogue* e);           \
  };                                                                                           \
  struct ZcArgs {                                                                              \
    void* const* in;                                                                           \
    void* const* out;                                                                          \
    void* const* consts;                                                                       \
    char* arena;                                                                               \
    const struct ZcServices* svc;                                                              \
    const int64_t* sym;        /* code for many sizes: the symbols' values of this call */     \
    const int64_t* places;     /* and each arena value's byte offset, by value id */           \
    const unsigned char* gemm; /* by kernel index: its library product's choice */             \
    const void* call;          /* the runtime's state of this call, for its services */        \
  };

#define ZC_ABI_STRINGIFY(...) #__VA_ARGS__
#define ZC_ABI_STRING(x) ZC_ABI_STRINGIFY(x)

namespace zc::codegen::cpp {

ZC_ABI_DEFINITIONS

// Every generated kernel has this type; it returns 0, or an error code (below).
using KernelFn = int (*)(const ZcArgs*);
inline constexpr int kErrIndexOutOfRange = 1;
inline constexpr int kErrNoMemory = 2;  // a kernel could not allocate its scratch

inline constexpr const char* kAbiSource = ZC_ABI_STRING(ZC_ABI_DEFINITIONS);

// Generated code prints an ops::EpilogueAct's number as ZcEpilogue::act, and the runtime reads
// it back as one: the numbers above are the enum's.
static_assert(static_cast<int>(ops::EpilogueAct::none) == 0 &&
                  static_cast<int>(ops::EpilogueAct::relu) == 1 &&
                  static_cast<int>(ops::EpilogueAct::gelu_tanh) == 2 &&
                  static_cast<int>(ops::EpilogueAct::gelu_erf) == 3,
              "ZcEpilogue::act and ops::EpilogueAct are out of step");

}  // namespace zc::codegen::cpp
