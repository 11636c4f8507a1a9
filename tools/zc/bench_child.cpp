// The measurement processes of `zc bench`: each starts fresh, as a user's program would, runs
// one model once (or in a loop for steady state) and prints what it measured on one line.
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "bench.h"
#include "support/bench_model.h"
#include "support/bundle_file.h"
#include "zc/zc.h"

namespace zc_cli::bench {

namespace {

// Per-call time on CUDA, as torch.compile's figures are taken: 3 calls to settle, then the
// median of 50 (call; synchronize), so that each sample is the GPU's work and not the launch.
double steady_cuda_us(const std::function<zc::Tensor()>& call) {
  for (int i = 0; i < 3; ++i) call();
  zc::cuda::synchronize();
  std::vector<double> us;
  for (int i = 0; i < 50; ++i) {
    auto c = Clock::now();
    call();
    zc::cuda::synchronize();
    us.push_back(ms_since(c) * 1e3);
  }
  return median_of(us);
}

// Per-call time on the CPU: the median over up to 2 s (at least 5 calls, at most 5000).
double steady_cpu_us(const std::function<zc::Tensor()>& call) {
  std::vector<double> us;
  auto until = Clock::now() + std::chrono::seconds(2);
  for (int i = 0; i < 5000 && (i < 5 || Clock::now() < until); ++i) {
    auto c = Clock::now();
    call();
    us.push_back(ms_since(c) * 1e3);
  }
  return median_of(us);
}

// `callers` threads calling at once for about 2 s (CPU): the median of every call's time and
// the calls per second of them all, printed as "callers N per_call_us X calls_per_s Y". zc
// shares the CPU's threads among calls in flight (src/cpu/threads.h); each caller's call
// then runs on its share instead of all callers starting a team of every core.
void concurrent_cpu(const std::function<zc::Tensor()>& call, int callers) {
  std::vector<std::vector<double>> us(static_cast<size_t>(callers));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  const auto until = start + std::chrono::seconds(2);
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      // Inference, as on the main thread: gradient mode is per thread, as in torch.
      zc::NoGradGuard no_grad;
      for (int i = 0; i < 2000 && (i < 3 || Clock::now() < until); ++i) {
        auto t = Clock::now();
        call();
        us[static_cast<size_t>(c)].push_back(ms_since(t) * 1e3);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = ms_since(start) / 1e3;
  std::vector<double> all;
  for (const auto& v : us) all.insert(all.end(), v.begin(), v.end());
  std::printf("callers %d per_call_us %.1f calls_per_s %.1f\n", callers, median_of(all),
              static_cast<double>(all.size()) / seconds);
}

}  // namespace

// Prints "ready first import per_call compiles build_ms autotune_ms" (ms, us for per_call).
// `--mode max-autotune` compiles with Mode::MaxAutotune. `--matmul-precision bf16` compiles with
// MatmulPrecision::Bf16 and prints a second line, "bf16_max_rel_err E": the largest difference
// of a call's result from an f32 compile's, relative to the largest |result|. With
// `--train 1` a call is a training step (see bench.h), else a forward without gradients.
// `--async 1` compiles with CompileOptions::async_compile (the first call may run eagerly).
// `--dropout P`: gpt-blocks with dropout P on both residual branches (drawn in training).
int child(const std::map<std::string, std::string>& a) {
  auto get = [&](const std::string& k, const std::string& d) {
    auto it = a.find(k);
    return it == a.end() ? d : it->second;
  };
  const bool train = get("train", "0") == "1";
  // Inference, as the torch script measures it, unless training.
  std::optional<zc::NoGradGuard> no_grad;
  if (!train) no_grad.emplace();
  std::string model = get("model", "seed"), regions = get("regions", "auto");
  int64_t layers = std::stoll(get("layers", "64"));
  const bool cuda = get("device", "cpu") == "cuda";
  // The driver is opened before the import is timed: the bundle is checked against the GPU's
  // architecture, and finding the driver is the process's start, not the import's work.
  if (cuda && !zc::cuda::is_available()) throw zc::Error(zc::cuda::unavailable_reason());
  double import_ms = 0;
  if (!get("load", "").empty()) {
    std::vector<uint8_t> bytes = zc_support::read_bundle(get("load", ""));
    auto t = Clock::now();
    zc::cache::load_artifacts(bytes);
    import_ms = ms_since(t);
  }
  zc::manual_seed(0);
  zc_support::BenchModel bench = zc_support::make_bench_model(model, layers, regions == "manual",
                                                              std::stod(get("dropout", "0")));
  std::shared_ptr<zc::nn::Module> m = bench.module;
  zc::Tensor x = bench.input;
  if (const std::string dt = get("dtype", ""); !dt.empty()) {
    // Parameters and a float input in that dtype (token ids stay integers).
    zc::DType dtype = zc::DType::f32;
    bool known = false;
    for (zc::DType t : {zc::DType::f32, zc::DType::f64, zc::DType::f16, zc::DType::bf16}) {
      if (zc::dtype_name(t) == dt) dtype = t, known = true;
    }
    if (!known) throw zc::Error("zc bench --dtype " + dt + ": expected f32, f64, f16 or bf16");
    m->to(dtype);
    if (zc::is_floating(x.dtype())) x = x.to(dtype);
  }
  if (cuda) {
    // Moving the weights creates the GPU context, before any clock starts (as torch's .to()).
    m->to(zc::Device::cuda(0));
    x = x.to(zc::Device::cuda(0));
    zc::cuda::synchronize();
  }
  std::function<zc::Tensor()> call;
  const bool eager = regions == "manual" || regions == "eager";
  if (eager) {
    call = [&] { return (*m)(x); };
  } else {
    const std::string mode = get("mode", "default");
    if (mode != "default" && mode != "max-autotune") {
      throw zc::Error("zc bench --mode " + mode + ": expected default or max-autotune");
    }
    const std::string precision = get("matmul-precision", "highest");
    if (precision != "highest" && precision != "bf16") {
      throw zc::Error("zc bench --matmul-precision " + precision + ": expected highest or bf16");
    }
    zc::CompileOptions options{
        .mode = mode == "max-autotune" ? zc::Mode::MaxAutotune : zc::Mode::Default,
        .matmul_precision =
            precision == "bf16" ? zc::MatmulPrecision::Bf16 : zc::MatmulPrecision::Highest,
        .regions = regions == "none" ? zc::Regions::None : zc::Regions::Auto};
    options.async_compile = get("async", "0") == "1";
    auto fast = zc::compile(m, options);
    call = [fast, &x] { return fast(x); };
  }
  // A training step: MSE against a fixed random target, backward, AdamW (one compiled kernel
  // over all parameters when the model is compiled; per parameter, eager, when not).
  std::unique_ptr<zc::optim::AdamW> opt;
  zc::Tensor target;
  if (train) {
    m->train();
    opt = std::make_unique<zc::optim::AdamW>(m->parameters(),
                                             zc::optim::AdamWOptions{.lr = 1e-4, .fused = !eager});
    // The bench models keep a float input's shape; token ids give logits (one eager call).
    zc::Shape out_shape = x.shape();
    if (!zc::is_floating(x.dtype())) {
      zc::NoGradGuard shape_only;
      out_shape = (*m)(x).shape();
    }
    target = zc::randn(out_shape).to(zc::is_floating(x.dtype()) ? x.dtype() : zc::DType::f32);
    target = target.to(x.device());
    call = [forward = std::move(call), &opt, &target] {
      opt->zero_grad();
      zc::Tensor loss = zc::nn::functional::mse_loss(forward(), target);
      loss.backward();
      opt->step();
      return loss;
    };
  }
  auto t = Clock::now();
  call();
  // GPU work is queued: the first call ends when its result is there.
  if (cuda) zc::cuda::synchronize();
  double first = ms_since(t);
  zc::compiler::Stats s = zc::compiler::stats();
  double per_call_us = 0;
  if (get("steady", "0") == "1") per_call_us = cuda ? steady_cuda_us(call) : steady_cpu_us(call);
  if (!get("save", "").empty()) zc_support::save_bundle(get("save", ""));
  std::printf("%.4f %.4f %.4f %.4f %lld %.4f %.4f\n", s.ready_ms, first, import_ms, per_call_us,
              static_cast<long long>(s.compiler_invocations), s.cxx_ms, s.autotune_ms);
  if (get("matmul-precision", "highest") == "bf16" && !eager && !train) {
    const zc::Tensor got = call().to(zc::Device::cpu()).to(zc::DType::f64);
    auto exact =
        zc::compile(m, {.regions = regions == "none" ? zc::Regions::None : zc::Regions::Auto});
    const zc::Tensor want = exact(x).to(zc::Device::cpu()).to(zc::DType::f64);
    const double scale = zc::amax(zc::abs(want)).item<double>();
    const double err = zc::amax(zc::abs(got - want)).item<double>();
    std::printf("bf16_max_rel_err %.3g\n", scale > 0 ? err / scale : err);
  }
  if (const int callers = std::stoi(get("callers", "0")); callers > 0) {
    if (cuda || train) throw zc::Error("zc bench --child --callers: CPU inference only");
    concurrent_cpu(call, callers);
  }
  return 0;
}

std::vector<Sample> spawn_all(const std::string& self, const std::vector<std::string>& envs,
                              const std::string& args) {
  std::vector<std::pair<std::string, FILE*>> running;
  for (const std::string& env : envs) {
    // NVRTC 12.9 and later keep their own cache of programs (the CUDA JIT cache, in
    // ~/.nv/ComputeCache), which zc's empty cache directory does not empty: a cold measurement
    // after another would find its programs compiled there (a ViT's first call measured 0.16 s
    // so, 1.6 s without). Off for every measurement; a warm one runs no NVRTC anyway.
    std::string cmd = "CUDA_CACHE_DISABLE=1 " + env + " " + self + " bench --child " + args;
    running.emplace_back(cmd, popen(cmd.c_str(), "r"));
  }
  std::vector<Sample> out;
  std::string failed;
  for (auto& [cmd, p] : running) {
    Sample s;
    if (!p || std::fscanf(p, "%lf %lf %lf %lf %lld %lf %lf", &s.ready, &s.first, &s.import,
                          &s.per_call, &s.compiles, &s.build_ms, &s.autotune_ms) != 7) {
      if (failed.empty()) failed = cmd;
    }
    if (p) pclose(p);
    out.push_back(s);
  }
  if (!failed.empty()) {
    throw zc::Error("zc bench: a measurement process failed: " + failed +
                    "; its error is printed above (run that command to see it alone)");
  }
  return out;
}

}  // namespace zc_cli::bench
