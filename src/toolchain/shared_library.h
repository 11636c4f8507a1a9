// Loading compiled shared objects into the process, from a file or from bytes (a cache hit
// holds the binary in memory; it never needs a file of its own).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace zc::toolchain {

// A loaded shared object. Symbols stay valid while any shared_ptr to it lives; the last one
// unloads it (dlclose), so keep the pointer next to every function pointer taken from it.
class SharedLibrary {
 public:
  // Loads the file at `path` (RTLD_NOW: every undefined symbol is resolved now, so a bad
  // binary fails here rather than at its first call; RTLD_LOCAL: its symbols do not leak into
  // other libraries, so many kernels may export the same names). A path without '/' is taken
  // relative to the current directory, never searched for. A path already loaded in this
  // process yields that same object, even if the file has changed since: load binaries that
  // may be replaced with from_bytes. Raises zc::Error with dlerror()'s message on failure.
  static std::shared_ptr<SharedLibrary> open(const std::string& path);

  // Loads a shared object held in memory: through an anonymous memory file (memfd_create and
  // /proc/self/fd), or through an unlinked temporary file where memory files cannot be used
  // or executed. Each call loads a new, independent copy, even for identical bytes. Holds one
  // file descriptor while loaded. Raises zc::Error when the bytes are not an ELF object or
  // the loader refuses them.
  static std::shared_ptr<SharedLibrary> from_bytes(std::span<const uint8_t> bytes);

  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The address of the exported symbol `name`. Raises zc::Error naming the symbol and the
  // library when it is not exported.
  void* symbol(const char* name) const;

  // symbol() cast to a function type: lib.function<int(int, int)>("zc_add").
  template <class Fn>
  Fn* function(const char* name) const {
    return reinterpret_cast<Fn*>(symbol(name));
  }

  // The path it was opened from, or a description of where its bytes came from.
  const std::string& name() const { return name_; }

 private:
  SharedLibrary(void* handle, std::string name, int fd);

  void* handle_;
  std::string name_;
  int fd_;  // the memory file of from_bytes, kept open so its /proc path stays unique; else -1
};

// The whole content of a file. Raises zc::Error naming the path and the reason.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace zc::toolchain
