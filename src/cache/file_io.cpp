#include "cache/file_io.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace zc::cache::file_io {

namespace {

struct ErrnoName {
  int code;
  const char* name;
};
constexpr ErrnoName kNames[] = {
    {ENOSPC, "ENOSPC"}, {EDQUOT, "EDQUOT"},   {EROFS, "EROFS"},   {EACCES, "EACCES"},
    {EPERM, "EPERM"},   {ENOTDIR, "ENOTDIR"}, {EISDIR, "EISDIR"}, {EFBIG, "EFBIG"},
    {EIO, "EIO"},       {ENOENT, "ENOENT"},   {EMFILE, "EMFILE"}, {ENAMETOOLONG, "ENAMETOOLONG"},
};

}  // namespace

std::string sys_error(int e) {
  std::string msg = std::generic_category().message(e);
  for (const ErrnoName& n : kNames) {
    if (n.code == e) return msg + " (" + n.name + ")";
  }
  return msg;
}

int make_dirs(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return 0;
  if (errno == EEXIST) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  }
  if (errno != ENOENT) return errno;
  size_t slash = dir.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return ENOENT;
  if (int e = make_dirs(dir.substr(0, slash))) return e;
  // Another process may create it between the two attempts.
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return 0;
  return errno;
}

ssize_t read_full(int fd, uint8_t* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::read(fd, p + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

int write_full(int fd, std::span<const uint8_t> a, std::span<const uint8_t> b) {
  iovec iov[2] = {{const_cast<uint8_t*>(a.data()), a.size()},
                  {const_cast<uint8_t*>(b.data()), b.size()}};
  int first = 0;
  while (first < 2) {
    ssize_t w = ::writev(fd, iov + first, 2 - first);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    auto left = static_cast<size_t>(w);
    while (first < 2 && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (first < 2) {
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return 0;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace zc::cache::file_io
