#include "toolchain/shared_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "toolchain/compiler.h"
#include "zc/error.h"

namespace zc::toolchain {
namespace {

// MFD_EXEC (Linux 6.3): where vm.memfd_noexec is set, a memory file made without it cannot
// be mapped executable. Older kernels reject the flag with EINVAL and need no such request.
constexpr unsigned kMfdExec = 0x0010U;

std::string dl_error() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown loader error";
}

bool write_all(int fd, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

int make_memfd() {
  int fd = ::memfd_create("zc-shared-object", MFD_CLOEXEC | kMfdExec);
  if (fd < 0 && errno == EINVAL) fd = ::memfd_create("zc-shared-object", MFD_CLOEXEC);
  return fd;
}

// dlopen finds an already-loaded library by the name it was opened with before it looks at the
// file. A library loaded from /proc/self/fd/N that could not be unloaded would therefore be
// returned again for a new memory file that reuses descriptor N. Extra slashes give the same
// file under a name no loaded library has.
void* dlopen_memfd(int fd, std::string* error) {
  for (size_t slashes = 1; slashes <= 16; ++slashes) {
    std::string name = "/proc/self/fd" + std::string(slashes, '/') + std::to_string(fd);
    if (void* stale = ::dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
      ::dlclose(stale);
      continue;
    }
    void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) *error = dl_error();
    return handle;
  }
  *error = "every name for descriptor " + std::to_string(fd) + " is taken by a loaded library";
  return nullptr;
}

}  // namespace

SharedLibrary::SharedLibrary(void* handle, std::string name, int fd)
    : handle_(handle), name_(std::move(name)), fd_(fd) {}

SharedLibrary::~SharedLibrary() {
  ::dlclose(handle_);
  // Only now may the descriptor number, and with it the /proc name, be reused.
  if (fd_ >= 0) ::close(fd_);
}

std::shared_ptr<SharedLibrary> SharedLibrary::open(const std::string& path) {
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw Error("cannot load the shared object " + path + ": " + dl_error());
  }
  return std::shared_ptr<SharedLibrary>(new SharedLibrary(handle, path, -1));
}

std::shared_ptr<SharedLibrary> SharedLibrary::from_bytes(std::span<const uint8_t> bytes) {
  std::string what = "a shared object of " + std::to_string(bytes.size()) + " bytes from memory";
  if (bytes.size() < 4 || std::memcmp(bytes.data(),
                                      "\x7f"
                                      "ELF",
                                      4) != 0) {
    throw Error("cannot load " + what +
                ": it is not an ELF object (a truncated or corrupted cache entry?)");
  }
  std::string memfd_error;
  int fd = make_memfd();
  if (fd < 0) {
    memfd_error = std::string("memfd_create: ") + std::strerror(errno);
  } else if (!write_all(fd, bytes)) {
    memfd_error = std::string("writing the memory file: ") + std::strerror(errno);
  } else if (void* handle = dlopen_memfd(fd, &memfd_error)) {
    return std::shared_ptr<SharedLibrary>(new SharedLibrary(handle, "<" + what + ">", fd));
  }
  if (fd >= 0) ::close(fd);

  // Memory files may be unavailable or not executable here; an unlinked file works anywhere
  // the compiled files themselves can be loaded from.
  std::string path = default_work_dir() + "/" + unique_file_stem() + ".so";
  int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  if (file < 0 || !write_all(file, bytes)) {
    std::string err = std::strerror(errno);
    if (file >= 0) ::close(file);
    ::unlink(path.c_str());
    throw Error("cannot load " + what + ": writing " + path + " failed: " + err +
                (memfd_error.empty() ? "" : "; through a memory file: " + memfd_error));
  }
  ::close(file);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string err = handle == nullptr ? dl_error() : "";
  ::unlink(path.c_str());  // the mapping outlives the name
  if (handle == nullptr) {
    throw Error("cannot load " + what + ": " + err +
                (memfd_error.empty() ? "" : "; through a memory file: " + memfd_error));
  }
  return std::shared_ptr<SharedLibrary>(new SharedLibrary(handle, "<" + what + ">", -1));
}

void* SharedLibrary::symbol(const char* name) const {
  ::dlerror();
  void* p = ::dlsym(handle_, name);
  if (p == nullptr) {
    throw Error(std::string("the shared object ") + name_ + " does not export the symbol '" + name +
                "'; generated entry points must be declared extern \"C\" with that name");
  }
  return p;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace zc::toolchain
