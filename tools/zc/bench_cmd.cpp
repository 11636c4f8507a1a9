// zc bench: every scenario in fresh processes, medians and spread, a table and JSON.
//
// Scenarios (each measurement is a child process, `zc bench --child ...`):
//   cold      seed at 8/64/256 layers with Regions Auto, manual regional and None; caches off
//   cache     seed64 and gpt-small: cold (empty cache dir), warm (same dir again), bundle (an
//             empty dir warmed from the cold run's bundle), remote (an empty dir, and a Redis
//             that the cold run filled)
//   first-result  seed64 and gpt-small on an empty cache: the first call's time when it compiles
//             first, and under async_compile (it runs eagerly while the code compiles)
//   fleet     8 processes started at once, each with its own empty cache dir and one shared
//             Redis, as 8 machines starting the same model: with single flight (one compiles,
//             the rest wait for its entries) and without (ZC_REMOTE_CACHE_LOCK_MS=0)
//   steady    seed64 and gpt-small per call: eager, compiled Auto, compiled None
//   cuda/...  with a GPU (--device): seed64 and gpt12 cache and steady rows on cuda:0
//             (bench_cuda.cpp)
//   train     a training step: seed64 on each device, gpt12 on cuda, cold, warm and per step
//             (bench_train.cpp)
//   autotune  Mode::MaxAutotune on the CPU, gpt-small (and with --only autotune also the
//             12-layer d=768 GPT blocks): a cold start without and with tuning (its tuning
//             time), a warm start with it (which times nothing), and per call tuned against
//             untuned, each repeat's processes one after another
// --only train|autotune|first-result measures those rows alone.
// `ready ms` is compiler::Stats::ready_ms: the wall time of the first call less its arithmetic
// (capture, region planning, cache lookups, compile or load); `first ms` is the whole first
// call. The Redis scenarios use --remote URL (a server whose zc keys may be cleared), or else a
// private redis-server on 127.0.0.1 when one is installed; without either they are skipped.
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "bench.h"
#include "cli.h"
#include "support/local_redis.h"
#include "zc/zc.h"

#if ZC_WITH_CUDA
#include "cuda/blaslt_start.h"
#endif

namespace zc_cli {

using bench::Clock;
using bench::ms_since;
using bench::Row;
using bench::Sample;
using bench::spawn;

namespace {

// The devices to measure: --device cpu|cuda|all, or by default every device this machine has.
struct Devices {
  bool cpu = true, cuda = false;
  std::string gpu;  // the GPU's name when cuda
};

Devices choose_devices(const std::string& option) {
  if (!option.empty() && option != "cpu" && option != "cuda" && option != "all") {
    throw UsageError{"zc bench: --device takes cpu, cuda or all, not '" + option + "'"};
  }
  Devices d;
  d.cpu = option != "cuda";
  if (option == "cpu") return d;
    // This process only names the GPU; the children measure it. Finding a machine's only GPU
    // would otherwise make its context here (docs/adr/0013), which would hold GPU memory and a
    // cuBLASLt start beside every child for the whole run.
#if ZC_WITH_CUDA
  zc::cuda::disable_prestart();
#endif
  const bool available = zc::cuda::is_available();
  if (!available) {
    if (option == "cuda") {
      throw zc::Error("zc bench --device cuda: no usable GPU. " + zc::cuda::unavailable_reason() +
                      ". For the CPU rows alone, pass --device cpu");
    }
    std::fprintf(stderr, "zc bench: the CUDA rows are skipped: %s\n",
                 zc::cuda::unavailable_reason().c_str());
    return d;
  }
  d.cuda = true;
  d.gpu = zc::cuda::device_properties(0).name;
  return d;
}

// Time to the first result on a cold cache: compiling before the first call returns, or
// compiling in the background while it runs eagerly (CompileOptions::async_compile).
void measure_first_result(const bench::Context& ctx, std::vector<Row>& rows) {
  const std::string& self = ctx.self;
  const std::string& root = ctx.root;
  for (std::string model : {"seed64", "gpt-small"}) {
    std::string m = model == "seed64" ? "--model seed --layers 64" : "--model gpt-small --layers 4";
    Row sync{"first-result", model, "auto", "cold", "first_ms"}, async = sync;
    async.regions = "async";
    for (int i = 0; i < ctx.repeats; ++i) {
      ctx.progress(model + " first result, async compile");
      std::string dir = root + "/" + model + "-first" + std::to_string(i);
      std::filesystem::create_directories(dir + "-sync");
      std::filesystem::create_directories(dir + "-async");
      Sample a = spawn(self, "ZC_CACHE_DIR=" + dir + "-sync", m);
      Sample b = spawn(self, "ZC_CACHE_DIR=" + dir + "-async", m + " --async 1");
      sync.values.push_back(a.first);
      async.values.push_back(b.first);
      sync.compiles = a.compiles;
      async.compiles = b.compiles;
    }
    rows.insert(rows.end(), {sync, async});
  }
}

// The CPU rows, as they were when the published CPU figures were taken.
void measure_cpu(const bench::Context& ctx, bool quick, std::vector<Row>& rows) {
  const std::string& self = ctx.self;
  const std::string& root = ctx.root;
  const int repeats = ctx.repeats;
  const std::string off = "ZC_FORCE_DISABLE_CACHES=1";
  // Cold first call by depth and region mode.
  std::vector<int64_t> depths =
      quick ? std::vector<int64_t>{8, 64} : std::vector<int64_t>{8, 64, 256};
  for (int64_t layers : depths) {
    for (std::string mode : {"auto", "manual", "none"}) {
      // A flat 256-layer graph takes the compiler many seconds: measured once.
      int n = mode == "none" && layers > 64 ? 1 : repeats;
      Row r{"cold", "seed", mode, "off", "first_ms", layers};
      for (int i = 0; i < n; ++i) {
        ctx.progress("seed " + std::to_string(layers) + " layers, regions " + mode);
        Sample s = spawn(self, off,
                         "--model seed --layers " + std::to_string(layers) + " --regions " + mode);
        r.values.push_back(s.first);
        r.compiles = s.compiles;
      }
      rows.push_back(r);
    }
  }
  // Cold, warm and bundle starts.
  for (std::string model : {"seed64", "gpt-small"}) {
    std::string m = model == "seed64" ? "--model seed --layers 64" : "--model gpt-small --layers 4";
    Row cold{"cache", model, "auto", "cold", "ready_ms"}, warm = cold, bundle = cold;
    warm.cache = "warm";
    bundle.cache = "bundle";
    Row import{"cache", model, "auto", "bundle", "import_ms"};
    for (int i = 0; i < repeats; ++i) {
      std::string dir = root + "/" + model + std::to_string(i), empty = dir + "-empty";
      std::filesystem::create_directories(dir);
      std::filesystem::create_directories(empty);
      ctx.progress(model + " cold/warm/bundle");
      Sample c = spawn(self, "ZC_CACHE_DIR=" + dir, m + " --save " + dir + "/bundle.zcb");
      Sample w = spawn(self, "ZC_CACHE_DIR=" + dir, m);
      Sample b = spawn(self, "ZC_CACHE_DIR=" + empty, m + " --load " + dir + "/bundle.zcb");
      cold.values.push_back(c.ready);
      warm.values.push_back(w.ready);
      bundle.values.push_back(b.ready);
      import.values.push_back(b.import);
      cold.compiles = c.compiles;
      warm.compiles = w.compiles;
      bundle.compiles = b.compiles;
    }
    rows.insert(rows.end(), {cold, warm, bundle, import});
  }
  measure_first_result(ctx, rows);
  // Starts with a Redis: from a warm remote into an empty local dir, and a fleet starting cold.
  if (!ctx.remote_url.empty()) {
    const std::string redis = "ZC_REMOTE_CACHE=" + ctx.remote_url;
    for (std::string model : {"seed64", "gpt-small"}) {
      std::string m =
          model == "seed64" ? "--model seed --layers 64" : "--model gpt-small --layers 4";
      Row remote{"cache", model, "auto", "remote", "ready_ms"};
      for (int i = 0; i < repeats; ++i) {
        ctx.progress(model + " from a warm remote cache");
        ctx.clear_remote();
        std::string filler = root + "/remote-fill-" + model + std::to_string(i);
        std::string empty = root + "/remote-empty-" + model + std::to_string(i);
        std::filesystem::create_directories(filler);
        std::filesystem::create_directories(empty);
        spawn(self, redis + " ZC_CACHE_DIR=" + filler, m);
        Sample s = spawn(self, redis + " ZC_CACHE_DIR=" + empty, m);
        remote.values.push_back(s.ready);
        remote.compiles = s.compiles;
      }
      rows.push_back(remote);
    }
    // Time to the last of 8 first results: from starting the processes until all are done
    // (process start, model construction and the first call); compiles summed over the 8.
    for (bool single_flight : {true, false}) {
      Row fleet{"fleet",       "seed64",
                "auto",        single_flight ? "single-flight" : "no-single-flight",
                "all_done_ms", 64};
      for (int i = 0; i < repeats; ++i) {
        ctx.progress(std::string("8 cold processes at once, single flight ") +
                     (single_flight ? "on" : "off"));
        ctx.clear_remote();
        std::vector<std::string> envs;
        for (int k = 0; k < 8; ++k) {
          std::string dir = root + "/fleet-" + std::to_string(i) + "-" +
                            std::to_string(single_flight) + "-" + std::to_string(k);
          std::filesystem::create_directories(dir);
          envs.push_back(redis + " ZC_CACHE_DIR=" + dir +
                         (single_flight ? "" : " ZC_REMOTE_CACHE_LOCK_MS=0"));
        }
        auto t = Clock::now();
        std::vector<Sample> all = bench::spawn_all(self, envs, "--model seed --layers 64");
        fleet.values.push_back(ms_since(t));
        fleet.compiles = 0;
        for (const Sample& s : all) fleet.compiles += s.compiles;
      }
      rows.push_back(fleet);
    }
    ctx.clear_remote();
  }
  // Steady state.
  for (std::string model : {"seed64", "gpt-small"}) {
    std::string m = model == "seed64" ? "--model seed --layers 64" : "--model gpt-small --layers 4";
    for (std::string mode : {"eager", "auto", "none"}) {
      Row r{"steady", model, mode, "off", "per_call_us"};
      for (int i = 0; i < repeats; ++i) {
        ctx.progress(model + " steady state, " + mode);
        r.values.push_back(spawn(self, off, m + " --regions " + mode + " --steady 1").per_call);
      }
      rows.push_back(r);
    }
  }
}

// Mode::MaxAutotune against the default, in fresh cache directories per repeat.
void measure_autotune(const bench::Context& ctx, bool large, std::vector<Row>& rows) {
  std::vector<std::pair<std::string, std::string>> models = {
      {"gpt-small", "--model gpt-small --layers 4"}};
  if (large) models.emplace_back("gpt12", "--model gpt-blocks --layers 12");
  for (const auto& [model, m] : models) {
    Row cold_default{"autotune", model, "auto", "cold-default", "ready_ms"};
    Row cold{"autotune", model, "auto", "cold", "ready_ms"}, warm = cold;
    warm.cache = "warm";
    Row tuning{"autotune", model, "auto", "cold", "autotune_ms"}, warm_tuning = tuning;
    warm_tuning.cache = "warm";
    Row per_default{"autotune", model, "auto", "default", "per_call_us"}, per_tuned = per_default;
    per_tuned.cache = "tuned";
    const std::string tuned = m + " --mode max-autotune";
    for (int i = 0; i < ctx.repeats; ++i) {
      const std::string dir = ctx.root + "/autotune-" + model + std::to_string(i);
      const std::string plain = dir + "-default";
      std::filesystem::create_directories(dir);
      std::filesystem::create_directories(plain);
      ctx.progress(model + " max_autotune cold/warm/steady");
      Sample d = spawn(ctx.self, "ZC_CACHE_DIR=" + plain, m);
      Sample c = spawn(ctx.self, "ZC_CACHE_DIR=" + dir, tuned);
      Sample w = spawn(ctx.self, "ZC_CACHE_DIR=" + dir, tuned);
      Sample st = spawn(ctx.self, "ZC_CACHE_DIR=" + dir, tuned + " --steady 1");
      Sample sd = spawn(ctx.self, "ZC_CACHE_DIR=" + plain, m + " --steady 1");
      cold_default.values.push_back(d.ready);
      cold.values.push_back(c.ready);
      warm.values.push_back(w.ready);
      tuning.values.push_back(c.autotune_ms);
      warm_tuning.values.push_back(w.autotune_ms);
      per_tuned.values.push_back(st.per_call);
      per_default.values.push_back(sd.per_call);
      cold.compiles = c.compiles;
      warm.compiles = w.compiles;
    }
    rows.insert(rows.end(),
                {cold_default, cold, tuning, warm, warm_tuning, per_default, per_tuned});
  }
}

}  // namespace

int cmd_bench(Args args) {
  if (!args.empty() && args[0] == "--child") {
    std::map<std::string, std::string> a;
    for (size_t i = 1; i + 1 < args.size(); i += 2)
      a[std::string(args[i]).substr(2)] = std::string(args[i + 1]);
    return bench::child(a);
  }
  int repeats = 3;
  bool quick = false;
  std::string json_path, compare_path, remote_url, device, only;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError{"zc bench: " + std::string(a) + " needs a value"};
      return std::string(args[++i]);
    };
    if (a == "--repeats") {
      repeats = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--compare") {
      compare_path = value();
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--remote") {
      remote_url = value();
    } else if (a == "--device") {
      device = value();
    } else if (a == "--only") {
      only = value();
      if (only != "train" && only != "autotune" && only != "first-result") {
        throw UsageError{"zc bench: --only takes train, autotune or first-result, not '" + only +
                         "'"};
      }
    } else {
      throw UsageError{"zc bench: unknown option '" + std::string(a) +
                       "'; expected --repeats N, --json FILE, --compare FILE, --quick, "
                       "--remote redis://HOST[:PORT][/DB], --device cpu|cuda|all or --only "
                       "train|autotune|first-result"};
    }
  }
  const Devices devices = choose_devices(device);
  std::map<std::string, double> baseline;
  if (!compare_path.empty()) baseline = bench::read_medians(compare_path);
  bench::Context ctx;
  ctx.self = std::filesystem::canonical("/proc/self/exe").string();
  ctx.root =
      std::filesystem::temp_directory_path().string() + "/zc-bench-" + std::to_string(getpid());
  ctx.repeats = repeats;
  ctx.progress = [](const std::string& what) {
    std::fprintf(stderr, "\r\033[K  measuring %s ...", what.c_str());
  };
  // The Redis scenarios use --remote, or a private redis-server when one is installed.
  std::unique_ptr<zc_support::LocalRedis> own_redis;
  if (remote_url.empty() && !zc_support::find_program("redis-server").empty()) {
    own_redis = std::make_unique<zc_support::LocalRedis>();
    if (own_redis->running()) remote_url = own_redis->url();
  }
  if (remote_url.empty()) {
    std::fprintf(stderr,
                 "zc bench: no Redis (install redis-server or pass --remote URL): the remote and "
                 "fleet scenarios are skipped\n");
  }
  ctx.remote_url = remote_url;
  ctx.clear_remote = [&ctx] {
    std::string cmd =
        "ZC_REMOTE_CACHE=" + ctx.remote_url + " " + ctx.self + " cache clear --remote --yes";
    if (std::system((cmd + " >/dev/null").c_str()) != 0) {
      throw zc::Error("zc bench: cannot clear the zc keys of " + ctx.remote_url + " (ran `" + cmd +
                      "`); check that the server is up and writable");
    }
  };
  std::vector<Row> rows;
  std::vector<std::string> failures;
  if (only.empty()) {
    if (devices.cpu) measure_cpu(ctx, quick, rows);
    if (devices.cuda) failures = bench::measure_cuda(ctx, rows);
  }
  if (only == "first-result" && devices.cpu) measure_first_result(ctx, rows);
  if ((only.empty() || only == "autotune") && devices.cpu) {
    measure_autotune(ctx, only == "autotune", rows);
  }
  if (only.empty() || only == "train") {
    for (std::string& f : bench::measure_training(ctx, devices.cpu, devices.cuda, rows)) {
      failures.push_back(std::move(f));
    }
  }
  std::fprintf(stderr, "\r\033[K");
  std::filesystem::remove_all(ctx.root);

  bench::print_table(rows, baseline, devices.gpu);
  if (!json_path.empty()) bench::write_json(json_path, rows, repeats, devices.gpu);
  for (const std::string& f : failures) std::fprintf(stderr, "zc bench: %s\n", f.c_str());
  if (!failures.empty()) {
    std::fprintf(stderr, "zc bench: %zu scenario(s) failed and have no rows; the rest are above\n",
                 failures.size());
    return kExitError;
  }
  return 0;
}

}  // namespace zc_cli
