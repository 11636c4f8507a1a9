// MatmulPrecision::Bf16 applied to an executable: each f32 library product that pays for it
// (cpu::bf16_pays, at each call's sizes) runs with bf16 operands (cpu/bf16_gemm.h, on oneDNN),
// in code of one size or of many (size templates), keeping the rest of its choice (the library and
// team share max_autotune chose, if it ran first: they serve when bf16 cannot). Where this process
// cannot run bf16 products (no AVX-512, no oneDNN) they run as that choice says in f32, and the
// result is exactly the default's.
#pragma once

#include <memory>

#include "codegen/executable.h"

namespace zc::runtime {

// `exec` itself when it has no product choices (no C++ library products: CUDA, the
// interpreter); otherwise a second executable sharing its code (with_product_choices).
std::shared_ptr<const codegen::Executable> with_bf16_products(
    std::shared_ptr<const codegen::Executable> exec);

}  // namespace zc::runtime
