// NVRTC: CUDA C++ source to a cubin for one GPU architecture, in process (no nvcc, no files
// but a kept source after a failure).
//
// The library is found by its file: libnvrtc.so.13 (then .12, then libnvrtc.so) where every
// CUDA library is looked for (cuda_library_dirs(): $CUDA_HOME, the toolkit the build found,
// /usr/local/cuda, $LD_LIBRARY_PATH, the system's and the loader's directories); failing
// those, by its soname through the dynamic loader. It is opened (dlopen, about 100 MB) only
// when a compile needs it, so one libzc runs with or without the CUDA toolkit, and a start that
// finds its kernels in a cache never loads it. It needs no GPU: a cubin for sm_90 is made on a
// machine without one, which is how generated CUDA code is tested where no GPU is.
//
// Named in cache keys like the C++ compiler (docs/adr/0005), by its file: the path as found,
// the file it resolves to, its size and mtime. What it is asked to build for (architecture,
// options) is the caller's target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zc::toolchain {

struct NvrtcInfo {
  std::string path;       // the library as found
  std::string real_path;  // `path` with symlinks resolved: the file whose size and mtime count
  uint64_t size = 0;
  int64_t mtime_ns = 0;

  // Path, file, size and mtime in one stable string, for cache keys.
  std::string identity() const;
};

// NVRTC's file, found once per process (thread-safe) without loading it; nullopt with the
// reason in `why` (every place looked at) when there is none.
std::optional<NvrtcInfo> find_nvrtc(std::string* why = nullptr);

// "13.0", from the library itself (which loads it); empty when it cannot be loaded.
std::string nvrtc_version();

struct CubinResult {
  std::vector<uint8_t> cubin;
  std::string log;  // NVRTC's messages on success (usually none)
  double seconds = 0;
};

// Compiles `source` for `arch` ("sm_90": a real architecture, so the result is a cubin the
// driver loads without a JIT step) with `options` (NVRTC's, e.g. "--std=c++17"). Many threads
// may compile at once: NVRTC runs one program at a time per process, so those that find this
// process's busy go to its helper processes (nvrtc_workers.h), with the same result. Raises
// zc::Error when NVRTC is missing or rejects the source: the message holds NVRTC's log (the first 4
// KiB) and the path of the source, kept in the toolchain's work directory so it can be read.
CubinResult compile_cubin(std::string_view source, const std::string& arch,
                          const std::vector<std::string>& options);

}  // namespace zc::toolchain
