#include "runtime/bf16_products.h"

#include "ops/gemm_choice.h"

namespace zc::runtime {

std::shared_ptr<const codegen::Executable> with_bf16_products(
    std::shared_ptr<const codegen::Executable> exec) {
  std::vector<uint8_t> choices = exec->product_choices();
  int set = 0;
  for (const codegen::LibraryProduct& lp : exec->library_products()) {
    if (!ops::bf16_pays(lp.problem)) continue;
    ops::GemmChoice c = ops::GemmChoice::from_code(choices.at(static_cast<size_t>(lp.site)));
    c.bf16 = true;
    choices[static_cast<size_t>(lp.site)] = c.code();
    ++set;
  }
  if (set == 0) return exec;
  return exec->with_product_choices(std::move(choices));
}

}  // namespace zc::runtime
