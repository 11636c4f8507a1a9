// The CUDA toolkit's shared libraries (NVRTC, cuBLASLt), found by their file without loading
// them: a library of hundreds of MB is mapped only when the process needs its code, yet its
// identity (the file, its size and mtime) can name it in cache keys from the start.
//
// The directories searched, in order: lib64/ and lib/ of $CUDA_HOME, of the toolkit the build
// found and of /usr/local/cuda; those of $LD_LIBRARY_PATH; the system's library directories;
// those the dynamic loader is configured with (/etc/ld.so.conf and its includes). Within a
// directory, the names are tried in the order given (newest soname first).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zc::toolchain {

struct LibraryFile {
  std::string path;       // the library as found
  std::string real_path;  // `path` with symlinks resolved: the file whose size and mtime count
  uint64_t size = 0;
  int64_t mtime_ns = 0;

  // "<kind>{path=...;file=...;size=...;mtime_ns=...}": stable, for cache keys.
  std::string identity(std::string_view kind) const;
};

// The directories above, read from the environment and the loader's configuration now.
std::vector<std::string> cuda_library_dirs();

// `path` when it is a regular file (after symlinks), described; nullopt otherwise.
std::optional<LibraryFile> describe_library_file(const std::string& path);

// The first of `names` in the first of `dirs` that holds one; nullopt when none does.
std::optional<LibraryFile> find_library_file(const std::vector<std::string>& dirs,
                                             const std::vector<std::string>& names);

}  // namespace zc::toolchain
