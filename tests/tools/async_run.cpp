// Async compile across processes: the first call of a compiled module while its compiler is
// held back, then the same call again, then after the compile finished.
//
//   async_run --release FILE [--retrain 1]
//
// ZC_CXX is expected to wait for FILE before compiling; this tool creates FILE only after its
// first two calls returned. With --retrain 1 the module is switched to training mode (a new
// structure for the guards) between those two calls, while its first compile still waits. Prints
// "first <stats json>", "second <stats json>", "ready <stats json>" (compiler::stats() after each
// step) and "max_diff {"value":<max |compiled - eager|>}"; or "error: <message>" and exits with 3.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/bench_model.h"
#include "zc/zc.h"

int main(int argc, char** argv) {
  zc::NoGradGuard no_grad;
  std::string release;
  bool retrain = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--release") release = argv[i + 1];
    if (std::string(argv[i]) == "--retrain") retrain = std::string(argv[i + 1]) == "1";
  }
  try {
    zc::manual_seed(0);
    zc_support::BenchModel bench = zc_support::make_bench_model("seed", 4, false);
    zc::Tensor want = (*bench.module)(bench.input);
    zc::CompileOptions options;
    options.async_compile = true;
    zc::CompiledModule fast = zc::compile(bench.module, options);
    zc::compiler::reset_stats();
    double diff = 0;
    auto check = [&](const zc::Tensor& y) {
      diff = std::max(diff, zc::max(zc::abs(y - want)).item<double>());
    };
    check(fast(bench.input));
    std::printf("first %s\n", zc::compiler::stats().json().c_str());
    if (retrain) bench.module->train();
    check(fast(bench.input));
    std::printf("second %s\n", zc::compiler::stats().json().c_str());
    std::ofstream(release) << "go\n";
    fast.wait_for_compiles();
    check(fast(bench.input));
    std::printf("ready %s\n", zc::compiler::stats().json().c_str());
    fast.wait_for_compiles();
    check(fast(bench.input));
    std::printf("final %s\n", zc::compiler::stats().json().c_str());
    std::printf("max_diff {\"value\":%g}\n", diff);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
  return 0;
}
