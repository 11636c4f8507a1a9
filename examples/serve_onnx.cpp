// Serving an ONNX model from C++: load the file, compile it once (a warm cache makes the
// compile a load), then answer requests.
//
//   serve_onnx MODEL.onnx [REQUESTS]
//
// Each request is a random input of the model's declared shape (a symbolic batch dim is 1).
// Prints how long the start took, whether the compiler ran, and the per-request time; run it
// twice with the same ZC_CACHE_DIR and the second start compiles nothing.
#include <zc/zc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [REQUESTS]\n", argv[0]);
    return 2;
  }
  const int requests = argc > 2 ? std::stoi(argv[2]) : 20;
  try {
    zc::NoGradGuard inference;  // no gradients: the compiled forward alone
    auto start = std::chrono::steady_clock::now();
    std::shared_ptr<zc::onnx::Model> model = zc::onnx::load(argv[1]);
    zc::CompiledModule fast = zc::compile(model);

    // One request's inputs, as the file declares them.
    auto request = [&] {
      std::vector<zc::Tensor> inputs;
      for (const zc::onnx::ValueInfo& in : model->inputs()) {
        zc::Shape shape;
        for (int64_t d : in.shape) shape.push_back(d < 0 ? 1 : d);
        inputs.push_back(zc::is_floating(in.dtype) ? zc::randn(shape).to(in.dtype)
                                                   : zc::zeros(shape, in.dtype));
      }
      return inputs;
    };

    // Warm-up before taking traffic: the first call captures and compiles, or loads.
    std::vector<zc::Tensor> out = fast(request());
    const double ready = ms_since(start);
    std::printf("ready in %.1f ms (load, compile or cache, first call); compiler runs: %lld\n",
                ready, static_cast<long long>(zc::compiler::stats().compiler_invocations));

    std::vector<double> times;
    for (int r = 0; r < requests; ++r) {
      std::vector<zc::Tensor> in = request();
      auto t0 = std::chrono::steady_clock::now();
      out = fast(in);
      times.push_back(ms_since(t0));
    }
    std::sort(times.begin(), times.end());
    if (!times.empty()) {
      std::printf("%d requests: median %.3f ms, output %s %s\n", requests, times[times.size() / 2],
                  model->outputs()[0].name.c_str(), zc::shape_str(out[0].shape()).c_str());
    }
  } catch (const zc::Error& e) {
    std::fprintf(stderr, "serve_onnx: %s\n", e.what());
    return 1;
  }
  return 0;
}
