// Hierarchical compilation figures. Each cold measurement is a fresh process with every
// persistent cache off (ZC_FORCE_DISABLE_CACHES=1): seed models of 8, 64 and 256 layers under
// Regions::Auto, Regions::None and manual regional compilation (each layer wrapped with
// zc::compiled), then steady-state calls of Auto against None for seed64 and gpt-small.
//
//   regions [--repeats N] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "zc/zc.h"

namespace {

struct ManualSeed : zc::nn::Module {
  std::shared_ptr<zc::nn::Linear> linear =
      register_module("linear", std::make_shared<zc::nn::Linear>(10, 10));
  std::shared_ptr<zc::nn::ModuleList> layers =
      register_module("layers", std::make_shared<zc::nn::ModuleList>());
  explicit ManualSeed(int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      layers->push_back(zc::compiled(std::make_shared<zc::models::SeedLayer>(10)));
  }
  zc::Tensor forward(const zc::Tensor& x) override {
    zc::Tensor h = (*linear)(x);
    for (const auto& l : *layers) h = (*l)(h);
    return h;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Child: builds the model, times the first call, then (optionally) steady-state calls.
int child(const std::string& model, int64_t layers, const std::string& mode, bool steady) {
  zc::manual_seed(0);
  std::shared_ptr<zc::nn::Module> m;
  zc::Tensor x;
  if (model == "gpt-small") {
    m = zc::models::gpt(
        {.vocab_size = 1024, .block_size = 128, .n_layer = layers, .n_head = 4, .d_model = 256});
    x = zc::randint(0, 1024, {4, 128});
  } else if (mode == "manual") {
    m = std::make_shared<ManualSeed>(layers);
    x = zc::randn({10, 10});
  } else {
    m = zc::models::seed_model(layers);
    x = zc::randn({10, 10});
  }
  m->eval();
  std::function<zc::Tensor()> call;
  if (mode == "manual") {
    call = [&] { return (*m)(x); };
  } else {
    auto fast = zc::compile(m, {.regions = mode == "none" ? zc::Regions::None : zc::Regions::Auto});
    call = [fast, &x] { return fast(x); };
  }
  auto t = std::chrono::steady_clock::now();
  call();
  double first =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  double per_call = 0;
  if (steady) {
    std::vector<double> us;
    int n = model == "gpt-small" ? 20 : 2000;
    for (int i = 0; i < n; ++i) {
      auto a = std::chrono::steady_clock::now();
      call();
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    }
    per_call = median(us);
  }
  std::printf("%.3f %.3f %lld\n", first, per_call,
              static_cast<long long>(zc::compiler::stats().compiler_invocations));
  return 0;
}

struct Result {
  double first_ms, per_call_us;
  long long compiles;
};

Result run(const std::string& self, const std::string& args) {
  std::string cmd = "ZC_FORCE_DISABLE_CACHES=1 " + self + " --child " + args;
  FILE* p = popen(cmd.c_str(), "r");
  Result r{};
  if (!p || std::fscanf(p, "%lf %lf %lld", &r.first_ms, &r.per_call_us, &r.compiles) != 3) {
    std::fprintf(stderr, "child failed: %s\n", cmd.c_str());
    std::exit(1);
  }
  pclose(p);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 6 && std::string(argv[1]) == "--child") {
    return child(argv[2], std::atoll(argv[3]), argv[4], std::string(argv[5]) == "steady");
  }
  int repeats = 3;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--repeats") repeats = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--json") json_path = argv[i + 1];
  }
  std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::string json = "[";
  auto record = [&](const std::string& model, int64_t layers, const std::string& mode,
                    const std::string& what, double value, long long compiles) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s{\"model\":\"%s\",\"layers\":%lld,\"regions\":\"%s\",\"%s\":%.3f,"
                  "\"compiler_invocations\":%lld}",
                  json.size() > 1 ? "," : "", model.c_str(), static_cast<long long>(layers),
                  mode.c_str(), what.c_str(), value, compiles);
    json += buf;
  };
  std::printf("cold first call, fresh process, caches off (median of %d)\n", repeats);
  std::printf("%-7s %-7s %12s %9s\n", "layers", "regions", "first ms", "compiles");
  for (int64_t layers : {8, 64, 256}) {
    for (std::string mode : {"auto", "manual", "none"}) {
      // The whole 256-layer graph takes minutes through the compiler; once is enough.
      int n = mode == "none" && layers > 64 ? 1 : repeats;
      std::vector<double> first;
      long long compiles = 0;
      for (int r = 0; r < n; ++r) {
        Result res = run(self, "seed " + std::to_string(layers) + " " + mode + " cold");
        first.push_back(res.first_ms);
        compiles = res.compiles;
      }
      std::printf("%-7lld %-7s %12.1f %9lld\n", static_cast<long long>(layers), mode.c_str(),
                  median(first), compiles);
      record("seed", layers, mode, "first_call_ms", median(first), compiles);
    }
  }
  std::printf("\nsteady state per call (median)\n%-10s %-7s %12s\n", "model", "regions",
              "per call us");
  for (std::string model : {"seed64", "gpt-small"}) {
    for (std::string mode : {"auto", "none"}) {
      int64_t layers = model == "seed64" ? 64 : 4;
      Result res = run(self, std::string(model == "seed64" ? "seed" : "gpt-small") + " " +
                                 std::to_string(layers) + " " + mode + " steady");
      std::printf("%-10s %-7s %12.1f\n", model.c_str(), mode.c_str(), res.per_call_us);
      record(model, layers, mode, "per_call_us", res.per_call_us, res.compiles);
    }
  }
  json += "]";
  if (!json_path.empty()) std::ofstream(json_path) << json << "\n";
  return 0;
}
