#include "toolchain/nvrtc_workers.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "util/env.h"

extern char** environ;

namespace zc::toolchain {

namespace {

// The wire (one machine, so native byte order): 64-bit lengths, then bytes. A request is the arch,
// the options and the source; an answer the outcome's stage, detail, log, cubin and seconds. A
// helper says it is ready with one byte, kReady, before its first answer.
constexpr char kReady = 'R';
// Lengths above this are a broken stream, not a program (generated sources are kilobytes).
constexpr uint64_t kMaxBytes = uint64_t{1} << 31;

void put_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

// Whole writes and reads on a stream socket; false when the other side is gone. MSG_NOSIGNAL:
// a helper that died must not end this process with SIGPIPE.
bool send_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}
bool recv_all(int fd, void* p, size_t size) {
  auto* to = static_cast<char*>(p);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd, to + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}
bool get_u64(int fd, uint64_t* v) {
  return recv_all(fd, v, sizeof *v);
}
bool get_str(int fd, std::string* s) {
  uint64_t n = 0;
  if (!get_u64(fd, &n) || n > kMaxBytes) return false;
  s->resize(n);
  return n == 0 || recv_all(fd, s->data(), n);
}

// Whether a helper has said it is ready, reading its ready byte without waiting: yes, not yet,
// or gone (it exited, or sent something else).
enum class Readiness { ready, not_yet, gone };
Readiness readiness(int fd) {
  char c = 0;
  const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
  if (n == 1) return c == kReady ? Readiness::ready : Readiness::gone;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return Readiness::not_yet;
  }
  return Readiness::gone;
}

// Ends helper `pid` (its socket `fd` closed first: a live one exits on its own).
void end_helper(int fd, int pid) {
  ::close(fd);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

size_t nvrtc_worker_count() {
  if (const std::optional<std::string> v = env::non_empty(env::Var::nvrtc_workers)) {
    char* end = nullptr;
    long n = std::strtol(v->c_str(), &end, 10);
    if (end && *end == '\0' && n >= 0) return static_cast<size_t>(std::min<long>(n, 16));
  }
  // Half the cores, at most 7 (with this process's own NVRTC, as many as a large graph's
  // programs: codegen/backends/cuda/programs.h): a helper's start (NVRTC loading, 100-250 ms
  // of one core) should not crowd a small machine's own start.
  const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
  return std::min<size_t>(7, cores / 2);
}

std::string nvrtc_helper_path() {
  namespace fs = std::filesystem;
  if (const std::optional<std::string> v = env::non_empty(env::Var::nvrtc_helper)) {
    return ::access(v->c_str(), X_OK) == 0 ? *v : std::string();
  }
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&nvrtc_helper_path), &info) == 0 || !info.dli_fname) {
    return "";
  }
  std::error_code ec;
  const fs::path lib = fs::weakly_canonical(fs::path(info.dli_fname), ec);
  if (ec) return "";
#ifndef ZC_NVRTC_HELPER_FROM_LIB
#define ZC_NVRTC_HELPER_FROM_LIB "../libexec/zc"
#endif
  // Beside the library in a build tree; where the install put it (CMakeLists.txt) otherwise.
  for (const fs::path& p : {lib.parent_path() / "zc-nvrtc-helper",
                            lib.parent_path() / ZC_NVRTC_HELPER_FROM_LIB / "zc-nvrtc-helper"}) {
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

int serve_nvrtc_requests(int fd, NvrtcCompileFn compile, const std::string& warm_arch,
                         const std::vector<std::string>& warm_options) {
  compile("extern \"C\" __global__ void zc_warm_up() {}\n", warm_arch, warm_options);
  if (!send_all(fd, std::string(1, kReady))) return 1;
  for (;;) {
    std::string arch, source;
    uint64_t count = 0;
    if (!get_str(fd, &arch)) return 0;  // the socket closed: the parent is done
    if (!get_u64(fd, &count) || count > 1024) return 1;
    std::vector<std::string> options(count);
    for (auto& o : options) {
      if (!get_str(fd, &o)) return 1;
    }
    if (!get_str(fd, &source)) return 1;
    NvrtcOutcome r = compile(source, arch, options);
    std::string out;
    put_u64(out, static_cast<uint64_t>(r.stage));
    put_str(out, r.detail);
    put_str(out, r.result.log);
    put_str(out, std::string_view(reinterpret_cast<const char*>(r.result.cubin.data()),
                                  r.result.cubin.size()));
    uint64_t seconds_bits = 0;
    std::memcpy(&seconds_bits, &r.result.seconds, sizeof seconds_bits);
    put_u64(out, seconds_bits);
    if (!send_all(fd, out)) return 1;
  }
}

NvrtcWorkers::~NvrtcWorkers() {
  std::lock_guard lock(mu_);
  for (Worker& w : workers_) end_helper(w.fd, w.pid);
}

size_t NvrtcWorkers::start(size_t n, const std::string& program, const std::string& warm_arch,
                           const std::vector<std::string>& warm_options) {
  std::lock_guard lock(mu_);
  if (owner_ >= 0) return 0;
  owner_ = ::getpid();
  std::vector<std::string> args{program, warm_arch};
  args.insert(args.end(), warm_options.begin(), warm_options.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  size_t started = 0;
  for (size_t i = 0; i < n; ++i) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) break;
    // The helper's end becomes its descriptor 3 (dup2 clears close-on-exec there only). Its
    // stdio is /dev/null: it writes nothing, and a caller reading this process's output to its
    // end (a pipe) must not wait for a helper that is still starting.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 3);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(sv[1]);
    if (rc != 0) {
      ::close(sv[0]);
      break;
    }
    workers_.push_back(Worker{pid, sv[0], false, false});
    ++started;
  }
  return started;
}

size_t NvrtcWorkers::size() const {
  std::lock_guard lock(mu_);
  return workers_.size();
}

std::vector<int> NvrtcWorkers::pids() const {
  std::lock_guard lock(mu_);
  std::vector<int> out;
  for (const Worker& w : workers_) out.push_back(w.pid);
  return out;
}

std::optional<NvrtcOutcome> NvrtcWorkers::try_compile(std::string_view source,
                                                      const std::string& arch,
                                                      const std::vector<std::string>& options) {
  int fd = -1, pid = -1;
  {
    std::lock_guard lock(mu_);
    // A fork of this process shares the helpers' sockets with it: only the process that
    // started them talks to them.
    if (::getpid() != owner_) return std::nullopt;
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (!it->busy && !it->ready) {
        const Readiness r = readiness(it->fd);
        if (r == Readiness::gone) {
          end_helper(it->fd, it->pid);
          it = workers_.erase(it);
          continue;
        }
        it->ready = r == Readiness::ready;
      }
      if (!it->busy && it->ready) {
        it->busy = true;
        fd = it->fd;
        pid = it->pid;
        break;
      }
      ++it;
    }
  }
  if (fd < 0) return std::nullopt;
  std::string request;
  put_str(request, arch);
  put_u64(request, options.size());
  for (const std::string& o : options) put_str(request, o);
  put_str(request, source);
  NvrtcOutcome r;
  uint64_t stage = 0, seconds_bits = 0;
  std::string cubin;
  const bool ok = send_all(fd, request) && get_u64(fd, &stage) && get_str(fd, &r.detail) &&
                  get_str(fd, &r.result.log) && get_str(fd, &cubin) && get_u64(fd, &seconds_bits) &&
                  stage <= static_cast<uint64_t>(NvrtcOutcome::Stage::handover);
  std::lock_guard lock(mu_);
  auto it =
      std::find_if(workers_.begin(), workers_.end(), [&](const Worker& w) { return w.pid == pid; });
  if (!ok) {
    // A helper that died or garbled its answer is dropped; the caller compiles in process.
    end_helper(fd, pid);
    workers_.erase(it);
    return std::nullopt;
  }
  it->busy = false;
  r.stage = static_cast<NvrtcOutcome::Stage>(stage);
  r.result.cubin.assign(cubin.begin(), cubin.end());
  std::memcpy(&r.result.seconds, &seconds_bits, sizeof seconds_bits);
  return r;
}

NvrtcWorkers& nvrtc_workers() {
  // Never destroyed: a compile may run on another thread while the process exits; the helpers
  // end when their sockets close with it.
  static NvrtcWorkers* pool = new NvrtcWorkers;
  return *pool;
}

void start_nvrtc_helpers(const std::string& arch, const std::vector<std::string>& options) {
  static std::once_flag once;
  std::call_once(once, [&] {
    const size_t n = nvrtc_worker_count();
    if (n == 0 || !find_nvrtc()) return;
    const std::string program = nvrtc_helper_path();
    if (program.empty()) return;
    nvrtc_workers().start(n, program, arch, options);
  });
}

}  // namespace zc::toolchain
