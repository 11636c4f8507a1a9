// A cache bundle: compile once, carry the results to another machine (or an empty cache) and
// start warm there.
//
//   bundle save FILE   compile seed64 and write every cache entry this process used to FILE
//   bundle load FILE   load FILE into the local cache, then run: nothing is compiled
//
// Set ZC_CACHE_HMAC_KEY_FILE to sign bundles on save and require a valid signature on load.
#include <zc/zc.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "save" && std::string(argv[1]) != "load")) {
    std::fprintf(stderr, "usage: %s save|load FILE\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1], path = argv[2];
  if (mode == "load") {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    zc::cache::LoadReport report = zc::cache::load_artifacts(bytes);
    std::printf("%s", report.str().c_str());  // loaded / already present / refused, with reasons
  }
  zc::manual_seed(0);
  auto model = zc::models::seed_model(64);
  zc::compile(model)(zc::randn({10, 10}));
  std::printf("compiler runs in this process: %lld\n",
              static_cast<long long>(zc::compiler::stats().compiler_invocations));
  if (mode == "save") {
    std::vector<uint8_t> bytes = zc::cache::save_artifacts();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    std::printf("wrote %zu bytes to %s\n", bytes.size(), path.c_str());
  }
  return 0;
}
