// What the CPU kernel library runs on this machine, for `zc env` (zc/version.h): its GEMM
// libraries, its convolutions and its threads. Each answer is an error text rather than an
// exception when the environment names something invalid: `zc env` must print the rest.
#include <string>

#include "cpu/blas.h"
#include "cpu/onednn_conv.h"
#include "cpu/threads.h"
#include "util/env.h"
#include "zc/error.h"
#include "zc/version.h"

namespace zc {

std::string blas_info() {
  return cpu::gemm_libraries();
}

std::string cpu_conv_info() {
  try {
    const std::string why = env::non_empty(env::Var::cpu_conv) ? " (ZC_CPU_CONV)" : "";
    if (!cpu::onednn_conv_available()) {
      return "columns and a product" + (why.empty() ? " (no oneDNN in this build)" : why);
    }
    if (!cpu::onednn_winograd_wanted()) return "oneDNN direct, channels-last" + why;
    const std::string side = std::to_string(cpu::kWinogradMinSide);
    return "oneDNN direct, channels-last; Winograd for 3x3 stride-1 ones of at least " + side +
           "x" + side + " outputs" +
           (why.empty()
                ? " (a pool of at most " + std::to_string(cpu::kWinogradMaxThreads) + " threads)"
                : why);
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

std::string cpu_threads_info() {
  try {
    const bool set = env::non_empty(env::Var::num_threads).has_value();
    return std::to_string(cpu::cpu_threads()) +
           (set ? " (ZC_NUM_THREADS)" : " (OpenMP's: OMP_NUM_THREADS, else the cores)") +
           "; calls running at once share them";
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace zc
