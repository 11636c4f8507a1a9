// Cache bundles as files, for the measurement and test programs that pass them between
// processes (zc bench's children, tests/tools).
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "zc/cache.h"

namespace zc_support {

// The file's bytes; empty when it cannot be read (load_artifacts then reports an empty bundle).
inline std::vector<uint8_t> read_bundle(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

// Every cache entry this process produced or used, as a bundle file.
inline void save_bundle(const std::string& path) {
  std::vector<uint8_t> bytes = zc::cache::save_artifacts();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

}  // namespace zc_support
