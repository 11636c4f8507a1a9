// zc bench: every scenario in fresh processes, medians and spread, a table and JSON.
//
// Scenarios (each measurement is a child process, `zc bench --child ...`):
//   cold      seed at 8/64/256 layers with Regions Auto, manual regional and None; caches off
//   cache     seed64 and gpt-small: cold (empty cache dir), warm (same dir again), bundle (an
//             empty dir warmed from the cold run's bundle), remote (an empty dir, and a Redis
//             that the cold run filled)
//   fleet     8 processes started at once, each with its own empty cache dir and one shared
//             Redis, as 8 machines starting the same model: with single flight (one compiles,
//             the rest wait for its entries) and without (ZC_REMOTE_CACHE_LOCK_MS=0)
//   steady    seed64 and gpt-small per call: eager, compiled Auto, compiled None
// `ready ms` is compiler::Stats::ready_ms: the wall time of the first call less its arithmetic
// (capture, region planning, cache lookups, compile or load); `first ms` is the whole first
// call. The Redis scenarios use --remote URL (a server whose zc keys may be cleared), or else a
// private redis-server on 127.0.0.1 when one is installed; without either they are skipped.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "cli.h"
#include "support/bench_model.h"
#include "support/local_redis.h"
#include "util/json_quote.h"
#include "zc/zc.h"

namespace zc_cli {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One measurement in this process; prints "ready first import per_call compiles".
int child(const std::map<std::string, std::string>& a) {
  auto get = [&](const std::string& k, const std::string& d) {
    auto it = a.find(k);
    return it == a.end() ? d : it->second;
  };
  std::string model = get("model", "seed"), regions = get("regions", "auto");
  int64_t layers = std::stoll(get("layers", "64"));
  double import_ms = 0;
  if (!get("load", "").empty()) {
    std::ifstream f(get("load", ""), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
    auto t = Clock::now();
    zc::cache::load_artifacts(bytes);
    import_ms = ms_since(t);
  }
  zc::manual_seed(0);
  zc_support::BenchModel bench = zc_support::make_bench_model(model, layers, regions == "manual");
  std::shared_ptr<zc::nn::Module> m = bench.module;
  zc::Tensor x = bench.input;
  std::function<zc::Tensor()> call;
  if (regions == "manual" || regions == "eager") {
    call = [&] { return (*m)(x); };
  } else {
    auto fast =
        zc::compile(m, {.regions = regions == "none" ? zc::Regions::None : zc::Regions::Auto});
    call = [fast, &x] { return fast(x); };
  }
  auto t = Clock::now();
  call();
  double first = ms_since(t);
  zc::compiler::Stats s = zc::compiler::stats();
  double per_call_us = 0;
  if (get("steady", "0") == "1") {
    std::vector<double> us;
    auto until = Clock::now() + std::chrono::seconds(2);
    for (int i = 0; i < 5000 && (i < 5 || Clock::now() < until); ++i) {
      auto c = Clock::now();
      call();
      us.push_back(ms_since(c) * 1e3);
    }
    per_call_us = median_of(us);
  }
  if (!get("save", "").empty()) {
    std::vector<uint8_t> bytes = zc::cache::save_artifacts();
    std::ofstream(get("save", ""), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  std::printf("%.4f %.4f %.4f %.4f %lld\n", s.ready_ms, first, import_ms, per_call_us,
              static_cast<long long>(s.compiler_invocations));
  return 0;
}

struct Sample {
  double ready = 0, first = 0, import = 0, per_call = 0;
  long long compiles = 0;
};

// Runs the measurement processes of `envs` at the same time (one each) and returns their
// samples in order, once all are done.
std::vector<Sample> spawn_all(const std::string& self, const std::vector<std::string>& envs,
                              const std::string& args) {
  std::vector<std::pair<std::string, FILE*>> running;
  for (const std::string& env : envs) {
    std::string cmd = env + " " + self + " bench --child " + args;
    running.emplace_back(cmd, popen(cmd.c_str(), "r"));
  }
  std::vector<Sample> out;
  std::string failed;
  for (auto& [cmd, p] : running) {
    Sample s;
    if (!p || std::fscanf(p, "%lf %lf %lf %lf %lld", &s.ready, &s.first, &s.import, &s.per_call,
                          &s.compiles) != 5) {
      if (failed.empty()) failed = cmd;
    }
    if (p) pclose(p);
    out.push_back(s);
  }
  if (!failed.empty()) throw zc::Error("zc bench: a measurement process failed: " + failed);
  return out;
}

Sample spawn(const std::string& self, const std::string& env, const std::string& args) {
  return spawn_all(self, {env}, args)[0];
}

// One table row: a scenario's samples, summarized.
struct Row {
  std::string scenario, model, regions, cache, metric;
  int64_t layers = 0;
  std::vector<double> values;
  long long compiles = 0;
  std::string key() const {
    return scenario + "/" + model + "/" + std::to_string(layers) + "/" + regions + "/" + cache +
           "/" + metric;
  }
};

std::string row_json(const Row& r) {
  std::vector<double> v = r.values;
  std::sort(v.begin(), v.end());
  std::ostringstream os;
  os << "{\"key\":\"" << r.key() << "\",\"scenario\":\"" << r.scenario << "\",\"model\":\""
     << r.model << "\",\"layers\":" << r.layers << ",\"regions\":\"" << r.regions
     << "\",\"cache\":\"" << r.cache << "\",\"metric\":\"" << r.metric
     << "\",\"median\":" << median_of(v) << ",\"min\":" << (v.empty() ? 0 : v.front())
     << ",\"max\":" << (v.empty() ? 0 : v.back()) << ",\"repeats\":" << v.size()
     << ",\"compiler_invocations\":" << r.compiles << "}";
  return os.str();
}

// Reads "key" and "median" of each row of a JSON file written by --json.
std::map<std::string, double> read_medians(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw zc::Error("zc bench --compare: cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::map<std::string, double> out;
  size_t at = 0;
  while ((at = text.find("\"key\":\"", at)) != std::string::npos) {
    size_t start = at + 7, end = text.find('"', start);
    size_t m = text.find("\"median\":", end);
    if (end == std::string::npos || m == std::string::npos) break;
    out[text.substr(start, end - start)] = std::strtod(text.c_str() + m + 9, nullptr);
    at = m;
  }
  if (out.empty()) throw zc::Error("zc bench --compare: " + path + " holds no zc bench rows");
  return out;
}

std::string machine() {
  std::string cpu = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  return cpu + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

}  // namespace

int cmd_bench(Args args) {
  if (!args.empty() && args[0] == "--child") {
    std::map<std::string, std::string> a;
    for (size_t i = 1; i + 1 < args.size(); i += 2)
      a[std::string(args[i]).substr(2)] = std::string(args[i + 1]);
    return child(a);
  }
  int repeats = 3;
  bool quick = false;
  std::string json_path, compare_path, remote_url;
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
    } else {
      throw UsageError{"zc bench: unknown option '" + std::string(a) +
                       "'; expected --repeats N, --json FILE, --compare FILE, --quick or "
                       "--remote redis://HOST[:PORT][/DB]"};
    }
  }
  std::map<std::string, double> baseline;
  if (!compare_path.empty()) baseline = read_medians(compare_path);
  std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::string root =
      std::filesystem::temp_directory_path().string() + "/zc-bench-" + std::to_string(getpid());
  std::string off = "ZC_FORCE_DISABLE_CACHES=1";
  std::vector<Row> rows;
  auto progress = [](const std::string& what) {
    std::fprintf(stderr, "\r\033[K  measuring %s ...", what.c_str());
  };

  // Cold first call by depth and region mode.
  std::vector<int64_t> depths =
      quick ? std::vector<int64_t>{8, 64} : std::vector<int64_t>{8, 64, 256};
  for (int64_t layers : depths) {
    for (std::string mode : {"auto", "manual", "none"}) {
      // A flat 256-layer graph takes the compiler many seconds: measured once.
      int n = mode == "none" && layers > 64 ? 1 : repeats;
      Row r{"cold", "seed", mode, "off", "first_ms", layers, {}, 0};
      for (int i = 0; i < n; ++i) {
        progress("seed " + std::to_string(layers) + " layers, regions " + mode);
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
    Row cold{"cache", model, "auto", "cold", "ready_ms", 0, {}, 0}, warm = cold, bundle = cold;
    warm.cache = "warm";
    bundle.cache = "bundle";
    Row import{"cache", model, "auto", "bundle", "import_ms", 0, {}, 0};
    for (int i = 0; i < repeats; ++i) {
      std::string dir = root + "/" + model + std::to_string(i), empty = dir + "-empty";
      std::filesystem::create_directories(dir);
      std::filesystem::create_directories(empty);
      progress(model + " cold/warm/bundle");
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
  // Starts with a Redis: from a warm remote into an empty local dir, and a fleet starting cold.
  std::unique_ptr<zc_support::LocalRedis> own_redis;
  if (remote_url.empty() && !zc_support::find_program("redis-server").empty()) {
    own_redis = std::make_unique<zc_support::LocalRedis>();
    if (own_redis->running()) remote_url = own_redis->url();
  }
  if (remote_url.empty()) {
    std::fprintf(stderr,
                 "\r\033[K  zc bench: no Redis (install redis-server or pass --remote URL): the "
                 "remote and fleet scenarios are skipped\n");
  } else {
    const std::string redis = "ZC_REMOTE_CACHE=" + remote_url;
    auto clear_remote = [&] {
      if (std::system((redis + " " + self + " cache clear --remote --yes >/dev/null").c_str()) != 0)
        throw zc::Error("zc bench: cannot clear the zc keys of " + remote_url);
    };
    for (std::string model : {"seed64", "gpt-small"}) {
      std::string m =
          model == "seed64" ? "--model seed --layers 64" : "--model gpt-small --layers 4";
      Row remote{"cache", model, "auto", "remote", "ready_ms", 0, {}, 0};
      for (int i = 0; i < repeats; ++i) {
        progress(model + " from a warm remote cache");
        clear_remote();
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
      Row fleet{
          "fleet",       "seed64", "auto", single_flight ? "single-flight" : "no-single-flight",
          "all_done_ms", 64,       {},     0};
      for (int i = 0; i < repeats; ++i) {
        progress(std::string("8 cold processes at once, single flight ") +
                 (single_flight ? "on" : "off"));
        clear_remote();
        std::vector<std::string> envs;
        for (int k = 0; k < 8; ++k) {
          std::string dir = root + "/fleet-" + std::to_string(i) + "-" +
                            std::to_string(single_flight) + "-" + std::to_string(k);
          std::filesystem::create_directories(dir);
          envs.push_back(redis + " ZC_CACHE_DIR=" + dir +
                         (single_flight ? "" : " ZC_REMOTE_CACHE_LOCK_MS=0"));
        }
        auto t = Clock::now();
        std::vector<Sample> all = spawn_all(self, envs, "--model seed --layers 64");
        fleet.values.push_back(ms_since(t));
        fleet.compiles = 0;
        for (const Sample& s : all) fleet.compiles += s.compiles;
      }
      rows.push_back(fleet);
    }
    clear_remote();
  }
  // Steady state.
  for (std::string model : {"seed64", "gpt-small"}) {
    std::string m = model == "seed64" ? "--model seed --layers 64" : "--model gpt-small --layers 4";
    for (std::string mode : {"eager", "auto", "none"}) {
      Row r{"steady", model, mode, "off", "per_call_us", 0, {}, 0};
      for (int i = 0; i < repeats; ++i) {
        progress(model + " steady state, " + mode);
        r.values.push_back(spawn(self, off, m + " --regions " + mode + " --steady 1").per_call);
      }
      rows.push_back(r);
    }
  }
  std::fprintf(stderr, "\r\033[K");
  std::filesystem::remove_all(root);

  std::printf("zc bench: zc %s, build %s, %s; %s\n", zc::version().c_str(),
              zc::build_id().substr(0, 16).c_str(), zc::compiler_id().c_str(), machine().c_str());
  std::printf("%-7s %-10s %6s %-7s %-16s %-12s %11s %11s %11s %8s%s\n", "what", "model", "layers",
              "regions", "cache", "metric", "median", "min", "max", "compiles",
              baseline.empty() ? "" : "  vs baseline");
  for (const Row& r : rows) {
    std::vector<double> v = r.values;
    std::sort(v.begin(), v.end());
    std::printf("%-7s %-10s %6lld %-7s %-16s %-12s %11.2f %11.2f %11.2f %8lld", r.scenario.c_str(),
                r.model.c_str(), static_cast<long long>(r.layers), r.regions.c_str(),
                r.cache.c_str(), r.metric.c_str(), median_of(v), v.front(), v.back(), r.compiles);
    auto b = baseline.find(r.key());
    if (b != baseline.end() && b->second > 0) std::printf("  %.2fx", median_of(v) / b->second);
    std::printf("\n");
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << "{\"zc_version\":" << zc::json::quote(zc::version())
      << ",\"build_id\":" << zc::json::quote(zc::build_id())
      << ",\"compiler\":" << zc::json::quote(zc::compiler_id())
      << ",\"machine\":" << zc::json::quote(machine()) << ",\"repeats\":" << repeats
      << ",\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) f << (i ? "," : "") << row_json(rows[i]);
    f << "]}\n";
  }
  return 0;
}

}  // namespace zc_cli
