// The zerocompile demo (the README's first command): seed64 compiled cold, warm in a fresh
// process, and from a bundle in an empty cache; the repeated layer compiled automatically, by
// hand and not at all; compiled against eager per call. Every start is a fresh process (the
// `zc bench --child` measurement), so "warm" means what a restarted service sees. With a GPU,
// the same on cuda:0. It ends with the ROI line of seed64 compiled in the demo's own process.
//
//   demo PATH_TO_ZC
#include <zc/zc.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

namespace {

struct Sample {
  double ready = 0, first = 0, import = 0, per_call = 0;
  long long compiles = 0;
};

// Runs one measurement process; while it takes longer than a second, shows a progress line.
Sample measure(const std::string& zc, const std::string& env, const std::string& args,
               const std::string& what) {
  std::string cmd = env + " " + zc + " bench --child " + args;
  Sample s;
  std::atomic<bool> done{false};
  bool ok = false;
  std::thread child([&] {
    FILE* p = popen(cmd.c_str(), "r");
    ok = p && std::fscanf(p, "%lf %lf %lf %lf %lld", &s.ready, &s.first, &s.import, &s.per_call,
                          &s.compiles) == 5;
    if (p) pclose(p);
    done = true;
  });
  // On a terminal the line updates in place; in a log it is written once, with the total.
  const bool tty = isatty(2);
  auto start = std::chrono::steady_clock::now();
  bool shown = false;
  double secs = 0;
  while (!done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (secs > 1.0 && !done && (tty || !shown)) {
      std::fprintf(stderr, tty ? "\r  %s ... %.1f s" : "  %s ...", what.c_str(), secs);
      shown = true;
    }
  }
  child.join();
  if (shown) std::fprintf(stderr, tty ? "\r\033[K" : " %.1f s\n", secs);
  if (!ok) {
    std::fprintf(stderr, "demo: a measurement failed: %s\n", cmd.c_str());
    std::exit(1);
  }
  return s;
}

std::string duration(double ms) {
  char buf[32];
  if (ms >= 1000) {
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000);
  } else if (ms >= 10) {
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  }
  return buf;
}

// The same starts on cuda:0 (each process moves the model there before its clock starts), and
// per call with CUDA graphs; or one line saying why there are no GPU rows.
void gpu_rows(const std::string& zc, const std::string& root, const std::string& seed) {
  if (!zc::cuda::is_available()) {
    std::printf("\n  GPU rows skipped: %s\n", zc::cuda::unavailable_reason().c_str());
    return;
  }
  const std::string cache = root + "/cache-cuda", empty = root + "/empty-cuda";
  const std::string bundle = root + "/seed64-cuda.zcb", gpu = seed + " --device cuda";
  std::filesystem::create_directories(cache);
  std::filesystem::create_directories(empty);
  const std::string off = "ZC_FORCE_DISABLE_CACHES=1";
  Sample cold = measure(zc, "ZC_CACHE_DIR=" + cache, gpu + " --save " + bundle,
                        "compiling seed64 for the GPU");
  Sample warm = measure(zc, "ZC_CACHE_DIR=" + cache, gpu, "GPU warm start");
  Sample from_bundle =
      measure(zc, "ZC_CACHE_DIR=" + empty, gpu + " --load " + bundle, "GPU bundle");
  Sample eager = measure(zc, off, gpu + " --regions eager --steady 1", "timing eager GPU calls");
  Sample compiled =
      measure(zc, off, gpu + " --regions auto --steady 1", "timing compiled GPU calls");
  std::printf("\n  on %s (NVRTC to a cubin, CUDA graphs):\n",
              zc::cuda::device_properties(0).name.c_str());
  std::printf("  %-52s %10s  %lld\n", "cold start: nothing cached", duration(cold.first).c_str(),
              cold.compiles);
  std::printf("  %-52s %10s  %lld\n", "warm start: a fresh process, same cache dir",
              duration(warm.ready).c_str(), warm.compiles);
  std::printf("  %-52s %10s  %lld\n", "from a bundle: a fresh process, empty cache dir",
              duration(from_bundle.ready).c_str(), from_bundle.compiles);
  std::printf("  per call: eager %.0f us, compiled %.1f us (%.1fx faster)\n", eager.per_call,
              compiled.per_call, eager.per_call / compiled.per_call);
  std::printf(
      "  torch.compile 2.11 on the same model (H100): 11.2 s cold, 2.9 s warm, 4.2 ms per call\n"
      "  (0.7 ms with mode=reduce-overhead) (docs/benchmarks.md)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH_TO_ZC\n", argv[0]);
    return 2;
  }
  std::string zc = argv[1];
  std::string root =
      std::filesystem::temp_directory_path().string() + "/zc-demo-" + std::to_string(getpid());
  std::string cache = root + "/cache", empty = root + "/empty", bundle = root + "/seed64.zcb";
  std::filesystem::create_directories(cache);
  std::filesystem::create_directories(empty);
  const std::string seed = "--model seed --layers 64";
  const std::string off = "ZC_FORCE_DISABLE_CACHES=1";

  Sample cold =
      measure(zc, "ZC_CACHE_DIR=" + cache, seed + " --save " + bundle, "compiling seed64");
  Sample warm = measure(zc, "ZC_CACHE_DIR=" + cache, seed, "warm start");
  Sample from_bundle = measure(zc, "ZC_CACHE_DIR=" + empty, seed + " --load " + bundle, "bundle");
  Sample manual = measure(zc, off, seed + " --regions manual", "compiling each layer by hand");
  Sample flat = measure(zc, off, seed + " --regions none", "compiling one flat graph of 64 layers");
  Sample eager = measure(zc, off, seed + " --regions eager --steady 1", "timing eager calls");
  Sample compiled = measure(zc, off, seed + " --regions auto --steady 1", "timing compiled calls");

  std::printf(
      "\nzerocompile: seed64 = Linear(10,10), then 64 x [Linear, ReLU, sigmoid, Linear, ReLU]\n\n");
  std::printf("  %-52s %10s  %s\n", "", "time", "graphs compiled");
  std::printf("  %-52s %10s  %lld\n", "cold start: nothing cached (repeated layer found)",
              duration(cold.first).c_str(), cold.compiles);
  std::printf("  %-52s %10s  %lld\n", "warm start: a fresh process, same cache dir",
              duration(warm.ready).c_str(), warm.compiles);
  std::printf("  %-52s %10s  %lld   (bundle %.0f KB, imported in %s)\n",
              "from a bundle: a fresh process, empty cache dir",
              duration(from_bundle.ready).c_str(), from_bundle.compiles,
              std::filesystem::file_size(bundle) / 1024.0, duration(from_bundle.import).c_str());
  std::printf("  %-52s %10s  %lld\n", "cold, each layer compiled by hand (zc::compiled)",
              duration(manual.first).c_str(), manual.compiles);
  std::printf("  %-52s %10s  %lld\n", "cold, one flat graph (Regions::None)",
              duration(flat.first).c_str(), flat.compiles);
  std::printf("\n  per call: eager %.0f us, compiled %.1f us (%.1fx faster)\n", eager.per_call,
              compiled.per_call, eager.per_call / compiled.per_call);
  std::printf(
      "  torch.compile 2.11 on the same model (CPU, 16-core host): 53 s cold, 34 s warm,\n"
      "  44 s from a Mega-Cache (docs/benchmarks.md)\n");
  gpu_rows(zc, root, seed);
  std::filesystem::remove_all(root);

  // What the compile returns: seed64 compiled in this process, called as a service would call
  // it, with a few calls timed eagerly for the comparison (docs/serving.md, "ROI report").
  zc::NoGradGuard no_grad;
  auto model = zc::models::seed_model(64);
  model->eval();
  zc::Tensor x = zc::randn({10, 10});
  zc::CompileOptions options;
  options.roi_sampling = true;
  zc::CompiledModule fast = zc::compile(model, options);
  for (int i = 0; i < 1000; ++i) fast(x);
  std::printf("\n  ROI: %s\n", zc::compiler::report().modules.back().str().c_str());
  return 0;
}
