// Prints the graph hash of a model's capture, for tests that compare hashes across processes.
// Usage: graph_hash seed64|gpt [seed]
#include <cstdio>
#include <string>

#include "capture/capture.h"
#include "ir/canonical.h"
#include "zc/zc.h"

int main(int argc, char** argv) {
  std::string which = argc > 1 ? argv[1] : "seed64";
  zc::manual_seed(argc > 2 ? std::stoull(argv[2]) : 0);
  std::shared_ptr<zc::nn::Module> m;
  zc::Tensor x;
  if (which == "gpt") {
    m = zc::models::gpt(
        {.vocab_size = 64, .block_size = 16, .n_layer = 2, .n_head = 2, .d_model = 16});
    x = zc::randint(0, 64, {2, 8});
  } else {
    m = zc::models::seed_model(64);
    x = zc::randn({10, 10});
  }
  m->eval();
  auto cap = zc::capture::capture_module(*m, x, nullptr, true);
  std::printf("%s\n", zc::hex(zc::ir::graph_hash(cap.graph)).c_str());
  return 0;
}
