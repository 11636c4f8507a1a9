// Writes the seed corpora of the fuzz harnesses: valid inputs that a fuzzer then mutates, so
// the paths past the format's checks are reached from the first run.
// Usage: seed_corpus <dir>; writes <dir>/entry_fuzz/* (and <dir>/bundle_fuzz/* when bundles
// are built in).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/entry.h"
#if ZC_FUZZ_HAVE_BUNDLE
#include "cache/bundle.h"
#endif

namespace {

namespace fs = std::filesystem;
using namespace zc::cache;

void write(const fs::path& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(dir);
  std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Entry make(int i, size_t size) {
  Entry e;
  e.level = kLevels[i % 4];
  e.key = zc::sha256("seed " + std::to_string(i));
  e.compile_ms = 1.5 * i;
  e.created_unix = 1'700'000'000u + static_cast<uint64_t>(i);
  e.payload.resize(size);
  for (size_t j = 0; j < size; ++j) e.payload[j] = static_cast<uint8_t>(j * 13 + i);
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  const size_t sizes[] = {0, 1, 64, 1000};
  for (int i = 0; i < 4; ++i)
    write(root / "entry_fuzz", "entry" + std::to_string(i), encode_entry(make(i, sizes[i])));
#if ZC_FUZZ_HAVE_BUNDLE
  const Provenance prov{"fuzz-build", "fuzz-target", "fuzz-toolchain"};
  std::vector<BundleItem> items;
  write(root / "bundle_fuzz", "empty", write_bundle(items));
  for (int i = 0; i < 3; ++i) items.push_back(BundleItem{make(i, sizes[i + 1]), prov});
  write(root / "bundle_fuzz", "three", write_bundle(items));
  const std::string key = "zc-fuzz-key";
  write(root / "bundle_fuzz", "three_signed",
        write_bundle(items, std::span(reinterpret_cast<const uint8_t*>(key.data()), key.size())));
#endif
  return 0;
}
