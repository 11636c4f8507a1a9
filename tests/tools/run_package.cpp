// Loads a package and runs it in a fresh process that has no model code: what a serving
// program does. For the package tests, run with ZC_CXX naming no compiler and an empty cache.
//
//   run_package PACKAGE OUT_DIR [--call A.npy[,B.npy...]]...
//
// Each --call's inputs (moved to the package's device) run once; its outputs go to
// OUT_DIR/call<k>_output_<i>.npy. Prints "calls <n>", "compiler_invocations <n>", "graphs_captured
// <n>" and "describe <first line>"; or "error: <message>" and exits with 3.
#include <cstdio>
#include <string>
#include <vector>

#include "zc/npy.h"
#include "zc/zc.h"

int main(int argc, char** argv) {
  zc::NoGradGuard no_grad;
  if (argc < 3) {
    std::fprintf(stderr, "usage: run_package PACKAGE OUT_DIR [--call A.npy[,B.npy]]...\n");
    return 2;
  }
  const std::string path = argv[1], out_dir = argv[2];
  std::vector<std::vector<std::string>> calls;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) != "--call") continue;
    std::vector<std::string> files;
    std::string list = argv[i + 1];
    for (size_t at = 0; at <= list.size();) {
      size_t end = list.find(',', at);
      if (end == std::string::npos) end = list.size();
      files.push_back(list.substr(at, end - at));
      at = end + 1;
    }
    calls.push_back(files);
  }
  try {
    zc::package::Package p = zc::package::load(path);
    for (size_t k = 0; k < calls.size(); ++k) {
      std::vector<zc::Tensor> inputs;
      for (const std::string& f : calls[k]) inputs.push_back(zc_cli::read_npy(f).to(p.device()));
      std::vector<zc::Tensor> out = p(inputs);
      for (size_t i = 0; i < out.size(); ++i) {
        zc_cli::write_npy(
            out_dir + "/call" + std::to_string(k) + "_output_" + std::to_string(i) + ".npy",
            out[i].to(zc::Device::cpu()));
      }
    }
    const zc::compiler::Stats s = zc::compiler::stats();
    const std::string d = p.describe();
    std::printf("calls %zu\n", calls.size());
    std::printf("compiler_invocations %lld\n", static_cast<long long>(s.compiler_invocations));
    std::printf("graphs_captured %lld\n", static_cast<long long>(s.graphs_captured));
    std::printf("describe %s\n", d.substr(0, d.find('\n')).c_str());
    return 0;
  } catch (const zc::Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
}
