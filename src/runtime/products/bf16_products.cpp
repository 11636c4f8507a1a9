#include "runtime/products/bf16_products.h"

#include "cpu/gemm_choice.h"

namespace zc::runtime {

std::shared_ptr<const codegen::Executable> with_bf16_products(
    std::shared_ptr<const codegen::Executable> exec) {
  // Every kernel's choice gets the bit: only f32 library products read it, each applying
  // cpu::bf16_pays to the sizes of its call, so code that serves many sizes (whose products'
  // sizes change per call) follows the rule too.
  std::vector<uint8_t> choices = exec->product_choices();
  if (choices.empty()) return exec;  // an executable with no library products (CUDA, eager)
  for (uint8_t& code : choices) {
    cpu::GemmChoice c = cpu::GemmChoice::from_code(code);
    c.bf16 = true;
    code = c.code();
  }
  return exec->with_product_choices(std::move(choices));
}

}  // namespace zc::runtime
