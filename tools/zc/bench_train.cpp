// The training rows of `zc bench`: a whole training step (forward, MSE loss, backward, AdamW)
// of seed64 on each device measured, and of gpt12 on cuda, the models and step that
// bench/torch_compile.py --train times for torch.compile. Rows:
//   train/MODEL/.../cold|warm/ready_ms and first_ms: a fresh process with an empty cache
//     directory, then with the same directory again. ready_ms is what the first step
//     spent before its forward ran (capture, the training graphs, the forward's compile or
//     load; the backward's goes on while the forward runs); first_ms is the whole first step,
//     the backward's and the optimizer's compile or load included, up to its result.
//   train/MODEL/.../auto|eager/off/step_us: per step in steady state, caches off, compiled
//     (fused AdamW) and eager (per-parameter AdamW).
#include <filesystem>
#include <string>
#include <vector>

#include "bench.h"
#include "zc/zc.h"

namespace zc_cli::bench {

namespace {

struct Model {
  std::string name, args, device;
};

void measure(const Context& ctx, const Model& m, std::vector<Row>& rows) {
  auto row = [&](const std::string& regions, const std::string& cache, const std::string& metric) {
    return Row("train", m.name, regions, cache, metric, 0, m.device);
  };
  Row cold_ready = row("auto", "cold", "ready_ms"), cold_first = row("auto", "cold", "first_ms");
  Row warm_ready = row("auto", "warm", "ready_ms"), warm_first = row("auto", "warm", "first_ms");
  for (int i = 0; i < ctx.repeats; ++i) {
    std::string dir = ctx.root + "/train-" + m.device + "-" + m.name + std::to_string(i);
    std::filesystem::create_directories(dir);
    ctx.progress(m.name + " training on " + m.device + " cold/warm");
    Sample c = spawn(ctx.self, "ZC_CACHE_DIR=" + dir, m.args);
    Sample w = spawn(ctx.self, "ZC_CACHE_DIR=" + dir, m.args);
    cold_ready.add(c.ready, c);
    cold_first.add(c.first, c);
    warm_ready.add(w.ready, w);
    warm_first.add(w.first, w);
  }
  rows.insert(rows.end(), {cold_ready, cold_first, warm_ready, warm_first});
  for (std::string mode : {"auto", "eager"}) {
    Row r = row(mode, "off", "step_us");
    for (int i = 0; i < ctx.repeats; ++i) {
      ctx.progress(m.name + " training on " + m.device + " steady state, " + mode);
      Sample s = spawn(ctx.self, "ZC_FORCE_DISABLE_CACHES=1",
                       m.args + " --regions " + mode + " --steady 1");
      r.add(s.per_call, s);
    }
    rows.push_back(r);
  }
}

}  // namespace

std::vector<std::string> measure_training(const Context& ctx, bool cpu, bool cuda,
                                          std::vector<Row>& rows) {
  std::vector<Model> models;
  if (cpu) models.push_back({"seed64", "--train 1 --model seed --layers 64", "cpu"});
  if (cuda) {
    models.push_back({"seed64", "--train 1 --model seed --layers 64 --device cuda", "cuda"});
    models.push_back({"gpt12", "--train 1 --model gpt-blocks --layers 12 --device cuda", "cuda"});
  }
  std::vector<std::string> failures;
  for (const Model& m : models) {
    try {
      measure(ctx, m, rows);
    } catch (const zc::Error& e) {
      failures.push_back(m.device + " training " + m.name + ": " + e.what());
    }
  }
  return failures;
}

}  // namespace zc_cli::bench
