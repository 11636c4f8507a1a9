// NVRTC: CUDA C++ source to a cubin for one GPU architecture, in process (no nvcc, no files
// but a kept source after a failure).
//
// The library is opened at run time, so one libzc runs with or without the CUDA toolkit: first
// the soname the build's headers name (libnvrtc.so.<major>), then libnvrtc.so, then the lib64/
// and lib/ directories of $CUDA_HOME and of the toolkit the build found. It needs no GPU: a
// cubin for sm_90 is made on a machine without one, which is how generated CUDA code is tested
// where no GPU is.
//
// Named in cache keys like the C++ compiler, by its file (path, size, mtime) and its version;
// what it is asked to build for (the architecture, the options) is the caller's target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zc::toolchain {

struct NvrtcInfo {
  std::string path;  // the library as opened (dladdr's answer)
  int major = 0, minor = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;

  // Path, version, size and mtime in one stable string, for cache keys.
  std::string identity() const;
};

// NVRTC, opened once per process (thread-safe); nullopt with the reason in `why` (every path
// tried and dlopen's answer) when it cannot be opened.
std::optional<NvrtcInfo> find_nvrtc(std::string* why = nullptr);

struct CubinResult {
  std::vector<uint8_t> cubin;
  std::string log;  // NVRTC's messages on success (usually none)
  double seconds = 0;
};

// Compiles `source` for `arch` ("sm_90": a real architecture, so the result is a cubin the
// driver loads without a JIT step) with `options` (NVRTC's, e.g. "--std=c++17"). Many threads
// may compile at once. Raises zc::Error when NVRTC is missing or rejects the source: the
// message holds NVRTC's log (the first 4 KiB) and the path of the source, kept in the
// toolchain's work directory so it can be read.
CubinResult compile_cubin(std::string_view source, const std::string& arch,
                          const std::vector<std::string>& options);

}  // namespace zc::toolchain
