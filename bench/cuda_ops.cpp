// The CUDA backend's compile costs and eager ops, in one program (no Google Benchmark loop:
// a first call happens once per process).
//
//   build/bench/cuda_ops [--json FILE]
//
// Prints, per op kind: the first call's time (capture of a one-op graph, NVRTC or a cache
// lookup, module load, launch, synchronize) and the steady per-op time (100 calls, then a
// synchronize, divided by 100), and NVRTC's time for a generated elementwise kernel and for
// one seed64 layer, and a cubin's load time. Run it twice with one ZC_CACHE_DIR to see a
// first call from a warm cache; with ZC_FORCE_DISABLE_CACHES=1 every first call compiles.
// Without a GPU only the NVRTC figures are measured. bench/torch_cuda_eager.py measures the
// same ops' steady time in torch.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "codegen/backends/cuda/backend.h"
#include "codegen/pipeline.h"
#include "cuda/device.h"
#include "cuda/driver.h"
#include "lower/pipeline.h"
#include "ops/dispatch.h"
#include "toolchain/nvrtc.h"
#include "zc/zc.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Row {
  std::string name;
  double first_ms = 0, steady_us = 0;
};

struct Fn : zc::nn::Module {
  std::function<zc::Tensor(const zc::Tensor&)> f;
  explicit Fn(std::function<zc::Tensor(const zc::Tensor&)> f) : f(std::move(f)) {}
  zc::Tensor forward(const zc::Tensor& x) override { return f(x); }
};

// The generated CUDA source of `f` on `x`.
std::string cuda_source(const std::function<zc::Tensor(const zc::Tensor&)>& f,
                        const zc::Tensor& x) {
  auto backend = zc::codegen::cuda::make_cuda_backend({.arch = "sm_90"});
  Fn m(f);
  auto g = zc::capture::capture_module(m, x, nullptr, true).graph;
  auto lowered = zc::lower::lower(g, zc::lower::LowerContext{});
  return zc::codegen::codegen(lowered, *backend).source.text;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even if a later op fails
  std::string json;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json" && i + 1 < argc) json = argv[++i];
  }
  std::vector<std::pair<std::string, double>> compile_rows;
  if (zc::toolchain::find_nvrtc()) {
    auto seed_layer = std::make_shared<zc::models::SeedLayer>(10);
    struct Src {
      const char* name;
      std::string text;
    } sources[] = {
        {"nvrtc_elementwise_ms",
         cuda_source([](const zc::Tensor& x) { return zc::sigmoid(x * 3.0) + 1.0; },
                     zc::randn({1024, 1024}))},
        {"nvrtc_seed_layer_ms",
         cuda_source([&](const zc::Tensor& x) { return (*seed_layer)(x); }, zc::randn({10, 10}))},
    };
    std::vector<uint8_t> cubin;
    for (const Src& s : sources) {
      std::vector<double> t;
      for (int r = 0; r < 5; ++r) {
        auto built = zc::toolchain::compile_cubin(s.text, "sm_90", {"--std=c++17", "--minimal"});
        t.push_back(built.seconds * 1000);
        cubin = built.cubin;
      }
      compile_rows.emplace_back(s.name, median(t));
    }
    if (zc::cuda::is_available() && zc::cuda::device_properties(0).major == 9) {
      zc::cuda::use_device(0);
      std::vector<double> t;
      for (int r = 0; r < 20; ++r) {
        auto start = Clock::now();
        CUmodule m = nullptr;
        zc::cuda::check(zc::cuda::driver().cuModuleLoadData(&m, cubin.data()), "load");
        t.push_back(ms_since(start));
        zc::cuda::driver().cuModuleUnload(m);
      }
      compile_rows.emplace_back("cubin_load_ms", median(t));
    }
  }
  for (const auto& [name, v] : compile_rows) std::printf("%-24s %10.3f\n", name.c_str(), v);

  std::vector<Row> rows;
  if (zc::cuda::is_available()) {
    using zc::Shape;
    using zc::Tensor;
    const zc::Device gpu = zc::Device::cuda(0);
    zc::manual_seed(0);
    Tensor a = zc::randn({1024, 1024}).to(gpu), b = zc::randn({1024, 1024}).to(gpu);
    Tensor h = zc::randn({1024, 768}).to(gpu), w = zc::randn({3072, 768}).to(gpu);
    Tensor g = zc::ones({768}).to(gpu), be = zc::zeros({768}).to(gpu);
    Tensor table = zc::randn({50257, 768}).to(gpu);
    Tensor ids = zc::randint(0, 50257, {8, 128}).to(gpu);
    Tensor q = zc::randn({8, 12, 128, 64}).to(gpu);
    // The attention backward's fused ops on the same heads (lse and delta as the derivative
    // makes them; q stands for k, v and the output's gradient too).
    const zc::ops::AttentionAttrs causal{true, 0.125};
    Tensor lse = zc::ops::call1(zc::ops::OpId::attention_lse, {q, q}, causal);
    Tensor delta = zc::sum(q * zc::scaled_dot_product_attention(q, q, q, true), {-1});
    auto attention_grad = [&](zc::ops::AttentionWrt wrt) {
      return zc::ops::call1(zc::ops::OpId::attention_grad, {q, q, q, q, lse, delta},
                            zc::ops::AttentionGradAttrs{true, 0.125, wrt});
    };
    struct Op {
      const char* name;
      std::function<Tensor()> f;
    } ops[] = {
        {"exp", [&] { return zc::exp(a); }},
        {"add", [&] { return a + b; }},
        {"mul_scalar", [&] { return a * 0.5; }},
        {"gelu", [&] { return zc::gelu(a); }},
        {"cast_f16", [&] { return a.to(zc::DType::f16); }},
        {"sum_dim1", [&] { return zc::sum(a, {1}); }},
        {"softmax", [&] { return zc::softmax(a, -1); }},
        {"layer_norm", [&] { return zc::layer_norm(h, {768}, g, be); }},
        {"matmul_1024", [&] { return zc::matmul(a, b); }},
        {"linear_1024x768x3072", [&] { return zc::linear(h, w); }},
        {"embedding", [&] { return zc::embedding(table, ids); }},
        {"cat",
         [&] {
           return zc::cat({a, b}, 0);
         }},
        {"transpose_contiguous", [&] { return a.t().contiguous(); }},
        {"attention_causal", [&] { return zc::scaled_dot_product_attention(q, q, q, true); }},
        {"attention_lse_causal",
         [&] {
           return zc::ops::call1(zc::ops::OpId::attention_lse, {q, q}, causal);
         }},
        {"attention_grad_q_causal", [&] { return attention_grad(zc::ops::AttentionWrt::q); }},
        {"attention_grad_kv_causal", [&] { return attention_grad(zc::ops::AttentionWrt::kv); }},
    };
    for (const Op& op : ops) {
      Row r{op.name};
      auto start = Clock::now();
      Tensor y;
      try {
        y = op.f();
      } catch (const zc::Error& e) {
        std::printf("%-24s failed: %s\n", op.name, e.what());
        continue;
      }
      zc::cuda::synchronize();
      r.first_ms = ms_since(start);
      for (int i = 0; i < 10; ++i) y = op.f();
      zc::cuda::synchronize();
      std::vector<double> t;
      for (int rep = 0; rep < 5; ++rep) {
        start = Clock::now();
        for (int i = 0; i < 100; ++i) y = op.f();
        zc::cuda::synchronize();
        t.push_back(ms_since(start) * 1000 / 100);
      }
      r.steady_us = median(t);
      std::printf("%-24s first %9.2f ms   steady %9.1f us\n", op.name, r.first_ms, r.steady_us);
      rows.push_back(r);
    }
    // Compiled models: first call, and steady per call with CUDA graphs on and off.
    struct Model {
      const char* name;
      std::function<std::shared_ptr<zc::nn::Module>()> make;
      Shape input;
    } models[] = {
        {"seed64", [] { return zc::models::seed_model(64); }, {10, 10}},
    };
    for (const Model& mm : models) {
      for (bool graphs : {true, false}) {
        Row r{std::string(mm.name) + (graphs ? "_compiled_graphs" : "_compiled_no_graphs")};
        auto m = mm.make();
        m->to(gpu);
        Tensor x = zc::randn(mm.input).to(gpu);
        auto fast = zc::compile(m, {.cuda_graphs = graphs});
        auto start = Clock::now();
        fast(x);
        zc::cuda::synchronize();
        r.first_ms = ms_since(start);
        for (int i = 0; i < 5; ++i) fast(x);
        zc::cuda::synchronize();
        std::vector<double> t;
        for (int i = 0; i < 50; ++i) {
          start = Clock::now();
          fast(x);
          zc::cuda::synchronize();
          t.push_back(ms_since(start) * 1000);
        }
        r.steady_us = median(t);
        std::printf("%-24s first %9.2f ms   steady %9.1f us\n", r.name.c_str(), r.first_ms,
                    r.steady_us);
        rows.push_back(r);
      }
    }
  } else {
    std::printf("no GPU: %s\n", zc::cuda::unavailable_reason().c_str());
  }
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"compile\":{";
    for (size_t i = 0; i < compile_rows.size(); ++i)
      out << (i ? "," : "") << "\"" << compile_rows[i].first << "\":" << compile_rows[i].second;
    out << "},\"ops\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      out << (i ? "," : "") << "{\"op\":\"" << rows[i].name
          << "\",\"first_ms\":" << rows[i].first_ms << ",\"steady_us\":" << rows[i].steady_us
          << "}";
    }
    out << "]}\n";
  }
  return 0;
}
