// How a compiled graph's library products run (CompileOptions::mode and matmul_precision): an
// option of a compile, part of its in-process code cache key (code_key) and of nothing below it.
#pragma once

namespace zc::runtime {

// Both set the executable's per-product choices (cpu/gemm_choice.h), never its source, so the
// code and every cache level below the in-process one are shared with the default.
struct ProductOptions {
  bool autotune = false;  // Mode::MaxAutotune: as runtime/products/autotune.h chose
  bool bf16 = false;      // MatmulPrecision::Bf16: runtime/products/bf16_products.h
  bool tf32 = false;      // MatmulPrecision::Tf32: Executable::with_tf32
  bool any() const { return autotune || bf16 || tf32; }
};

}  // namespace zc::runtime
