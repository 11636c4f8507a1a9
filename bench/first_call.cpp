// First-call figures in fresh processes: cold (empty cache), warm (same cache dir again) and
// bundle (an empty dir warmed from the cold run's bundle), for seed64 and gpt-small. Each
// measurement is its own process; the table shows medians of several runs.
//
//   first_call [--repeats N] [--json FILE]
//
// Columns: `ready ms` is capture + cache lookup + load (or compile): what a warm start costs
// before any arithmetic; `first call ms` adds the first forward pass; `import ms` is
// load_artifacts of the bundle; `process ms` is the child's whole wall time.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "zc/zc.h"

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int child(const std::string& model, const std::string& load, const std::string& save) {
  auto start = std::chrono::steady_clock::now();
  double import_ms = 0;
  if (!load.empty()) {
    std::ifstream f(load, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
    auto t = std::chrono::steady_clock::now();
    zc::cache::load_artifacts(bytes);
    import_ms = since(t);
  }
  zc::manual_seed(0);
  std::shared_ptr<zc::nn::Module> m;
  zc::Tensor x;
  if (model == "gpt-small") {
    m = zc::models::gpt(
        {.vocab_size = 1024, .block_size = 128, .n_layer = 4, .n_head = 4, .d_model = 256});
    x = zc::randint(0, 1024, {4, 128});
  } else {
    m = zc::models::seed_model(64);
    x = zc::randn({10, 10});
  }
  m->eval();
  auto fast = zc::compile(m, {.regions = zc::Regions::None});
  auto t = std::chrono::steady_clock::now();
  fast(x);
  double first_ms = since(t);
  zc::compiler::Stats s = zc::compiler::stats();
  if (!save.empty()) {
    std::vector<uint8_t> bytes = zc::cache::save_artifacts();
    std::ofstream(save, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  std::printf("%.3f %.3f %.3f %.3f %lld\n", s.capture_ms + s.compile_ms, first_ms, import_ms,
              since(start), static_cast<long long>(s.compiler_invocations));
  return 0;
}

struct Sample {
  double ready, first, import, process;
  long long compiles;
};

Sample run_child(const std::string& self, const std::string& dir, const std::string& model,
                 const std::string& extra) {
  std::string cmd = "ZC_CACHE_DIR=" + dir + " " + self + " --child " + model + extra;
  auto t = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  Sample s{};
  if (!p || std::fscanf(p, "%lf %lf %lf %lf %lld", &s.ready, &s.first, &s.import, &s.process,
                        &s.compiles) != 5) {
    std::fprintf(stderr, "child failed: %s\n", cmd.c_str());
    std::exit(1);
  }
  pclose(p);
  s.process = since(t);
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--child") {
    std::string load, save;
    for (int i = 3; i + 1 < argc; i += 2) {
      if (std::string(argv[i]) == "--load") load = argv[i + 1];
      if (std::string(argv[i]) == "--save") save = argv[i + 1];
    }
    return child(argv[2], load, save);
  }
  int repeats = 5;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--repeats") repeats = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--json") json_path = argv[i + 1];
  }
  std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::string root = std::filesystem::temp_directory_path().string() + "/zc-first-call-" +
                     std::to_string(getpid());
  std::printf("zc %s, build %s, %s\n", zc::version().c_str(), zc::build_id().substr(0, 16).c_str(),
              zc::compiler_id().c_str());
  std::printf("%-10s %-7s %9s %14s %10s %11s %9s\n", "model", "cache", "ready ms", "first call ms",
              "import ms", "process ms", "compiles");
  std::string json = "[";
  for (std::string model : {"seed64", "gpt-small"}) {
    std::map<std::string, std::vector<Sample>> by;
    for (int r = 0; r < repeats; ++r) {
      std::string cold = root + "/" + model + "-cold-" + std::to_string(r);
      std::string empty = root + "/" + model + "-bundle-" + std::to_string(r);
      std::filesystem::create_directories(cold);
      std::filesystem::create_directories(empty);
      std::string bundle = cold + "/bundle.zcb";
      by["cold"].push_back(run_child(self, cold, model, " --save " + bundle));
      by["warm"].push_back(run_child(self, cold, model, ""));
      by["bundle"].push_back(run_child(self, empty, model, " --load " + bundle));
    }
    for (std::string scenario : {"cold", "warm", "bundle"}) {
      std::vector<double> ready, first, import, process;
      long long compiles = 0;
      for (const Sample& s : by[scenario]) {
        ready.push_back(s.ready);
        first.push_back(s.first);
        import.push_back(s.import);
        process.push_back(s.process);
        compiles = std::max(compiles, s.compiles);
      }
      std::printf("%-10s %-7s %9.2f %14.2f %10.2f %11.1f %9lld\n", model.c_str(), scenario.c_str(),
                  median(ready), median(first), median(import), median(process), compiles);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"model\":\"%s\",\"cache\":\"%s\",\"ready_ms\":%.3f,\"first_call_ms\":%.3f,"
                    "\"import_ms\":%.3f,\"process_ms\":%.1f,\"compiler_invocations\":%lld,"
                    "\"repeats\":%d}",
                    json.size() > 1 ? "," : "", model.c_str(), scenario.c_str(), median(ready),
                    median(first), median(import), median(process), compiles, repeats);
      json += buf;
    }
  }
  json += "]";
  if (!json_path.empty()) std::ofstream(json_path) << json << "\n";
  std::filesystem::remove_all(root);
  return 0;
}
