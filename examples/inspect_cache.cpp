// What the caches did in this process, and why a lookup missed.
//
// Run it twice with the same ZC_CACHE_DIR: the first run misses and compiles, the second hits.
// With ZC_LOGS=cache every lookup is printed with its key's components; diff two runs' logs to
// see which component changed when a lookup you expected to hit missed.
#include <zc/zc.h>

#include <cstdio>

int main() {
  auto model = zc::models::seed_model(8);
  zc::compile(model)(zc::randn({10, 10}));

  zc::cache::Stats cache = zc::cache::stats();
  std::printf("%s", cache.str().c_str());  // per level and tier: hits, misses, errors, puts
  const zc::cache::LevelStats* graph = cache.find("graph", "disk");
  if (graph && graph->hits > 0) {
    std::printf("warm start: the compiled graph came from %s\n", cache.dir.c_str());
  } else {
    std::printf("cold start: compiled, and stored for the next process\n");
  }
  zc::compiler::Stats s = zc::compiler::stats();
  std::printf("capture %.2f ms, compile %.2f ms (lower %.2f, codegen %.2f, c++ %.2f, load %.2f)\n",
              s.capture_ms, s.compile_ms, s.lower_ms, s.codegen_ms, s.cxx_ms, s.load_ms);
  return 0;
}
