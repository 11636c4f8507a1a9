// An ahead-of-time package: compile a model once where the compiler is, then serve it from one
// file on a machine with no compiler, no cache and none of the model's code.
//
//   package build FILE   compile a 64-layer seed model for inputs [10, 10] and [4, 10] into FILE
//   package serve FILE   load FILE and run it: nothing is compiled or captured (this path uses
//                        only zc::package::load, as a serving program would)
//
// Set ZC_CACHE_HMAC_KEY_FILE to sign the package when building and require the signature when
// serving. `serve` works with ZC_CXX pointing at no compiler at all.
#include <zc/zc.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

int build(const std::string& path) {
  zc::manual_seed(0);
  auto model = zc::models::seed_model(64);
  model->eval();
  // One example call per input shape the package must serve.
  zc::package::save(model, {{zc::randn({10, 10})}, {zc::randn({4, 10})}}, path);
  std::printf("wrote %s (compiler runs: %lld)\n", path.c_str(),
              static_cast<long long>(zc::compiler::stats().compiler_invocations));
  return 0;
}

int serve(const std::string& path) {
  zc::NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  zc::package::Package model = zc::package::load(path);  // refuses a bad file with the reason
  const auto t1 = std::chrono::steady_clock::now();
  std::printf("%s", model.describe().c_str());
  for (const zc::package::CallSignature& call : model.calls()) {
    zc::Tensor y = model(zc::randn(call.shapes[0]));
    std::printf("served %s -> %s\n", call.str().c_str(), zc::shape_str(y.shape()).c_str());
  }
  std::printf("loaded in %.1f ms; compiler runs: %lld, graphs captured: %lld\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              static_cast<long long>(zc::compiler::stats().compiler_invocations),
              static_cast<long long>(zc::compiler::stats().graphs_captured));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "build" && std::string(argv[1]) != "serve")) {
    std::fprintf(stderr, "usage: %s build|serve FILE\n", argv[0]);
    return 2;
  }
  try {
    return std::string(argv[1]) == "build" ? build(argv[2]) : serve(argv[2]);
  } catch (const zc::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
