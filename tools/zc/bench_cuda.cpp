// The CUDA rows of `zc bench`: the CPU rows' kinds of start and steady state, on cuda:0, for
// seed64 and gpt12 (12 transformer blocks on [8, 128, 768], torch.compile's transformer
// shape), gpt12 also in bf16 (gpt12-bf16). Each row keeps the time NVRTC took in its processes, so
// that the report can say what share of a cold start was NVRTC and what was zc.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"
#include "zc/zc.h"

namespace zc_cli::bench {

namespace {

struct Model {
  std::string name, args;
};

Row cuda_row(const std::string& scenario, const std::string& model, const std::string& regions,
             const std::string& cache, const std::string& metric) {
  return Row(scenario, model, regions, cache, metric, 0, "cuda");
}

// Cold (an empty cache directory; its bundle saved), warm (the same directory again) and bundle
// (an empty directory warmed from that bundle): ready and whole first call of each.
void starts(const Context& ctx, const Model& m, std::vector<Row>& rows) {
  Row cold_ready = cuda_row("cache", m.name, "auto", "cold", "ready_ms");
  Row cold_first = cuda_row("cache", m.name, "auto", "cold", "first_ms");
  Row warm_ready = cuda_row("cache", m.name, "auto", "warm", "ready_ms");
  Row warm_first = cuda_row("cache", m.name, "auto", "warm", "first_ms");
  Row bundle_ready = cuda_row("cache", m.name, "auto", "bundle", "ready_ms");
  Row bundle_first = cuda_row("cache", m.name, "auto", "bundle", "first_ms");
  Row import = cuda_row("cache", m.name, "auto", "bundle", "import_ms");
  for (int i = 0; i < ctx.repeats; ++i) {
    std::string dir = ctx.root + "/cuda-" + m.name + std::to_string(i), empty = dir + "-empty";
    std::filesystem::create_directories(dir);
    std::filesystem::create_directories(empty);
    ctx.progress(m.name + " on cuda cold/warm/bundle");
    Sample c = spawn(ctx.self, "ZC_CACHE_DIR=" + dir, m.args + " --save " + dir + "/bundle.zcb");
    Sample w = spawn(ctx.self, "ZC_CACHE_DIR=" + dir, m.args);
    Sample b = spawn(ctx.self, "ZC_CACHE_DIR=" + empty, m.args + " --load " + dir + "/bundle.zcb");
    cold_ready.add(c.ready, c);
    cold_first.add(c.first, c);
    warm_ready.add(w.ready, w);
    warm_first.add(w.first, w);
    bundle_ready.add(b.ready, b);
    bundle_first.add(b.first, b);
    import.add(b.import, b);
  }
  rows.insert(rows.end(),
              {cold_ready, cold_first, warm_ready, warm_first, bundle_ready, bundle_first, import});
}

// An empty local directory and a Redis that another process filled: a new machine of a fleet.
void remote(const Context& ctx, const Model& m, std::vector<Row>& rows) {
  const std::string redis = "ZC_REMOTE_CACHE=" + ctx.remote_url;
  Row ready = cuda_row("cache", m.name, "auto", "remote", "ready_ms");
  Row first = cuda_row("cache", m.name, "auto", "remote", "first_ms");
  for (int i = 0; i < ctx.repeats; ++i) {
    ctx.progress(m.name + " on cuda from a warm remote cache");
    ctx.clear_remote();
    std::string filler = ctx.root + "/cuda-remote-fill-" + m.name + std::to_string(i);
    std::string empty = ctx.root + "/cuda-remote-empty-" + m.name + std::to_string(i);
    std::filesystem::create_directories(filler);
    std::filesystem::create_directories(empty);
    spawn(ctx.self, redis + " ZC_CACHE_DIR=" + filler, m.args);
    Sample s = spawn(ctx.self, redis + " ZC_CACHE_DIR=" + empty, m.args);
    ready.add(s.ready, s);
    first.add(s.first, s);
  }
  rows.insert(rows.end(), {ready, first});
}

// Per call in steady state with every persistent cache off: eager (each op its own kernel),
// compiled with the repeated block found (Auto) and compiled flat (None).
void steady(const Context& ctx, const Model& m, std::vector<Row>& rows) {
  for (std::string mode : {"eager", "auto", "none"}) {
    Row r = cuda_row("steady", m.name, mode, "off", "per_call_us");
    for (int i = 0; i < ctx.repeats; ++i) {
      ctx.progress(m.name + " on cuda steady state, " + mode);
      Sample s = spawn(ctx.self, "ZC_FORCE_DISABLE_CACHES=1",
                       m.args + " --regions " + mode + " --steady 1");
      r.add(s.per_call, s);
    }
    rows.push_back(r);
  }
}

}  // namespace

std::vector<std::string> measure_cuda(const Context& ctx, std::vector<Row>& rows) {
  const std::vector<Model> models = {
      {"seed64", "--model seed --layers 64 --device cuda"},
      {"gpt12", "--model gpt-blocks --layers 12 --device cuda"},
      {"gpt12-bf16", "--model gpt-blocks --layers 12 --device cuda --dtype bf16"},
  };
  // A scenario that fails costs its own rows, not the others' (nor the CPU rows measured
  // before): its error is returned for the command to report.
  std::vector<std::string> failures;
  auto guarded = [&](const std::string& what, const std::function<void()>& f) {
    try {
      f();
    } catch (const zc::Error& e) {
      failures.push_back("cuda " + what + ": " + e.what());
    }
  };
  for (const Model& m : models) guarded(m.name + " starts", [&] { starts(ctx, m, rows); });
  if (!ctx.remote_url.empty()) {
    for (const Model& m : models) guarded(m.name + " remote", [&] { remote(ctx, m, rows); });
    guarded("remote", ctx.clear_remote);
  }
  for (const Model& m : models) guarded(m.name + " steady", [&] { steady(ctx, m, rows); });
  return failures;
}

}  // namespace zc_cli::bench
