// The accuracy check: a small GPT compiled with the check on for the first two calls of each
// graph, with f32 products and with bf16 products (MatmulPrecision::Bf16); every checked call
// is also run eagerly, and the reports say how far each output was from eager and within what
// tolerance. Exits 1 if any check failed.
//
//   accuracy_check
//   ZC_LOGS=accuracy accuracy_check        (a line per passing check as it happens)
//
// Any program gets the same with ZC_ACCURACY_CHECK=N in its environment.
#include <zc/zc.h>

#include <cstdio>
#include <memory>

int main() {
  zc::manual_seed(0);
  zc::models::GPTConfig cfg;
  cfg.vocab_size = 512;
  cfg.block_size = 64;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.d_model = 128;
  auto gpt = std::make_shared<zc::models::GPT>(cfg);
  gpt->eval();

  for (zc::MatmulPrecision precision : {zc::MatmulPrecision::Highest, zc::MatmulPrecision::Bf16}) {
    zc::CompileOptions options;
    options.matmul_precision = precision;
    options.accuracy_check.calls = 2;
    zc::CompiledModule fast = zc::compile(gpt, options);
    // Three calls: the first two are checked, the third only runs.
    for (int i = 0; i < 3; ++i) fast(zc::randint(0, cfg.vocab_size, {2, 32}));
  }

  for (const zc::compiler::AccuracyReport& r : zc::compiler::accuracy_reports()) {
    std::printf("%s\n", r.str().c_str());
  }
  zc::compiler::Stats st = zc::compiler::stats();
  std::printf("checked calls: %lld, failures: %lld\n", static_cast<long long>(st.accuracy_checks),
              static_cast<long long>(st.accuracy_failures));
  return st.accuracy_failures == 0 ? 0 : 1;
}
