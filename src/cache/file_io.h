// Small POSIX file helpers for the disk tier: errors come back as errno values (never
// exceptions), so every caller can turn a failure into a miss or a failed put with a reason.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace zc::cache::file_io {

// "Permission denied (EACCES)": the message, and the errno's name for the ones a user acts on.
std::string sys_error(int e);

// Creates `dir` and its missing parents with mode 0755 (less the umask). Returns 0 or the
// errno of the failing step (ENOTDIR when a component is a file).
int make_dirs(const std::string& dir);

// Reads up to `n` bytes from the current offset, retrying short reads until end of file;
// the count, or -1 with errno set.
ssize_t read_full(int fd, uint8_t* p, size_t n);

// Writes `a` then `b` completely (one writev when the kernel allows); 0 or an errno.
int write_full(int fd, std::span<const uint8_t> a, std::span<const uint8_t> b);

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  void reset();
  int fd_;
};

}  // namespace zc::cache::file_io
