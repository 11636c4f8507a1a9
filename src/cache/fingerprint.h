// The target fingerprint: everything that can change a generated binary without changing the
// graph. Part of every key whose value depends on it, so a cache can only return what this
// process would have produced itself.
#pragma once

#include <string>

namespace zc::cache {

struct Fingerprint {
  std::string build_id;   // hash of zc's own sources
  std::string toolchain;  // compiler path, version, size and mtime; empty without a compiler
  std::string target;     // ISA level, flags and, for native, the CPU's features
  std::string gpu;        // compute capability and CUDA/NVRTC versions, once a CUDA backend exists
};

// This process's fingerprint, computed once (it asks the compiler for its version).
const Fingerprint& process_fingerprint();

}  // namespace zc::cache
