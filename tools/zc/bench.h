// What the parts of `zc bench` share: the measurement processes, their samples and the rows
// they become.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace zc_cli::bench {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One measurement process's report (see child()).
struct Sample {
  double ready = 0, first = 0, import = 0, per_call = 0;
  long long compiles = 0;
  double build_ms = 0;     // compiler::Stats::cxx_ms: the C++ compiler, or NVRTC on CUDA
  double autotune_ms = 0;  // compiler::Stats::autotune_ms (--mode max-autotune)
};

// One table row: a scenario's samples, summarized. `device` "cpu" keeps the key and JSON that
// published CPU figures were compared with; any other device prefixes the key with its name.
struct Row {
  Row(std::string scenario, std::string model, std::string regions, std::string cache,
      std::string metric, int64_t layers = 0, std::string device = "cpu")
      : scenario(std::move(scenario)),
        model(std::move(model)),
        regions(std::move(regions)),
        cache(std::move(cache)),
        metric(std::move(metric)),
        layers(layers),
        device(std::move(device)) {}
  std::string scenario, model, regions, cache, metric;
  int64_t layers = 0;
  std::string device;
  std::vector<double> values;
  std::vector<double> build_ms;  // one per value, for rows of other devices
  long long compiles = 0;
  std::string key() const {
    std::string k = scenario + "/" + model + "/" + std::to_string(layers) + "/" + regions + "/" +
                    cache + "/" + metric;
    return device == "cpu" ? k : device + "/" + k;
  }
  void add(double value, const Sample& s) {
    values.push_back(value);
    build_ms.push_back(s.build_ms);
    compiles = s.compiles;
  }
};

// `zc bench --child KEY VALUE...`: one measurement in this process, printed on one line.
int child(const std::map<std::string, std::string>& args);

// Runs the measurement processes of `envs` at the same time (one each) and returns their
// samples in order, once all are done; raises zc::Error naming the first that failed.
std::vector<Sample> spawn_all(const std::string& self, const std::vector<std::string>& envs,
                              const std::string& args);
inline Sample spawn(const std::string& self, const std::string& env, const std::string& args) {
  return spawn_all(self, {env}, args)[0];
}

// What the scenarios of one device need from the command.
struct Context {
  std::string self;        // this executable, for the measurement processes
  std::string root;        // a private scratch directory
  std::string remote_url;  // empty: no Redis, the remote scenarios are skipped
  int repeats = 3;
  std::function<void(const std::string&)> progress;
  std::function<void()> clear_remote;  // clears the zc keys of remote_url
};

// The report. `gpu` names the GPU the rows of cuda ran on; empty when none did.
std::string machine();
void print_table(const std::vector<Row>& rows, const std::map<std::string, double>& baseline,
                 const std::string& gpu);
void write_json(const std::string& path, const std::vector<Row>& rows, int repeats,
                const std::string& gpu);
// The median of each row of a file that --json wrote, by key.
std::map<std::string, double> read_medians(const std::string& path);

// The CUDA rows: seed64 and gpt12 cold, warm, bundle, remote and steady state on cuda:0.
// Returns what failed, one line each; the rows of what did not fail are added.
std::vector<std::string> measure_cuda(const Context& ctx, std::vector<Row>& rows);

// The training rows (bench_train.cpp): seed64 on each device asked for, gpt12 on cuda. Returns
// what failed, as measure_cuda.
std::vector<std::string> measure_training(const Context& ctx, bool cpu, bool cuda,
                                          std::vector<Row>& rows);

}  // namespace zc_cli::bench
