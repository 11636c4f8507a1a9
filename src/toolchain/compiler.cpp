#include "toolchain/compiler.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <sstream>

#include "toolchain/build_priority.h"
#include "util/cache_dir.h"
#include "util/check.h"
#include "util/env.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/error.h"

extern char** environ;

namespace zc::toolchain {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxProcessOutput = 1 << 20;
constexpr size_t kMaxReportedOutput = 4096;

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The absolute path of `name`: made absolute when it holds a '/', else the first executable
// match on `path_var` (an empty entry means the current directory, as for a shell).
std::optional<std::string> locate(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) {
    std::error_code ec;
    fs::path abs = fs::absolute(name, ec);
    if (ec) return std::nullopt;
    return abs.lexically_normal().string();
  }
  std::stringstream dirs(path_var);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::error_code ec;
    fs::path candidate = fs::absolute(fs::path(dir.empty() ? "." : dir) / name, ec);
    if (!ec && is_executable_file(candidate.string())) return candidate.lexically_normal().string();
  }
  return std::nullopt;
}

// Creates a new file holding `data`; never opens an existing one.
void write_new_file(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("cannot create " + path + ": " + std::strerror(errno) +
                "; check that the directory is writable or choose another one");
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      throw Error("cannot write " + path + ": " + std::strerror(err) + " (is the disk full?)");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

// The `--version` memo. A memo file holds kMemoHeader then the version line and a newline;
// anything else (torn by a crash, truncated, edited) is not a memo and the compiler is probed.
constexpr std::string_view kMemoHeader = "zc-cxx-probe v1\n";
constexpr size_t kMaxMemoBytes = 4096;

void append_stat(std::string* out, const struct stat& st) {
  auto ns = [](const struct timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  *out += std::to_string(static_cast<uint64_t>(st.st_dev)) + "," +
          std::to_string(static_cast<uint64_t>(st.st_ino)) + "," +
          std::to_string(static_cast<int64_t>(st.st_size)) + "," + std::to_string(ns(st.st_mtim)) +
          "," + std::to_string(ns(st.st_ctim)) + ";";
}

// The memo's file name for the compiler found at `path`: a hash of the stat identity of the
// path itself (the symlink, if it is one) and of the file it resolves to, and of both paths.
// Empty when either cannot be stat'ed.
std::string memo_name(const std::string& path, const std::string& real_path) {
  struct stat found, file;
  if (::lstat(path.c_str(), &found) != 0 || ::stat(real_path.c_str(), &file) != 0) return "";
  std::string id(kMemoHeader);
  for (const std::string* p : {&path, &real_path}) id += std::to_string(p->size()) + ":" + *p + ";";
  append_stat(&id, found);
  append_stat(&id, file);
  return "cxx-" + hex(sha256(id)).substr(0, 32);
}

// The version line held in the memo file at `memo`, or nullopt when there is none or it is
// malformed.
std::optional<std::string> read_memo(const std::string& memo) {
  int fd = ::open(memo.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) {
      ZC_LOG(cache) << "toolchain: cannot read " << memo << ": " << std::strerror(errno);
    }
    return std::nullopt;
  }
  char buf[kMaxMemoBytes + 1];
  size_t n = 0;
  while (n < sizeof buf) {
    ssize_t r = ::read(fd, buf + n, sizeof buf - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += static_cast<size_t>(r);
  }
  ::close(fd);
  std::string_view text(buf, n);
  std::string_view version = text.substr(std::min(text.size(), kMemoHeader.size()));
  if (n > kMaxMemoBytes || !text.starts_with(kMemoHeader) || version.size() < 2 ||
      version.back() != '\n' || version.find('\n') != version.size() - 1) {
    ZC_LOG(cache) << "toolchain: ignoring the malformed memo " << memo;
    return std::nullopt;
  }
  version.remove_suffix(1);
  return std::string(version);
}

// Writes the memo through a temp file and a rename, so a reader sees the old file or the
// whole new one, and concurrent writers (who write the same text) simply replace each other.
void write_memo(const std::string& dir, const std::string& memo, const std::string& version) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string tmp = dir + "/tmp." + unique_file_stem();
  try {
    if (ec) throw Error("cannot create " + dir + ": " + ec.message());
    write_new_file(tmp, std::string(kMemoHeader) + version + "\n");
    if (::rename(tmp.c_str(), memo.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      throw Error("cannot rename " + tmp + " to " + memo + ": " + std::strerror(err));
    }
  } catch (const Error& e) {
    // Only an optimisation: the next process probes again.
    ZC_LOG(cache) << "toolchain: compiler memo not written: " << e.what();
  }
}

// The family the name of the compiler's file gives, or nullopt when the file must be asked:
// a script, a known wrapper, or a name without a family in it.
std::optional<CompilerFamily> family_of_file(const std::string& real_path) {
  std::string name = fs::path(real_path).filename().string();
  for (const char* wrapper : {"ccache", "sccache", "distcc", "icecc", "buildcache"}) {
    if (name.find(wrapper) != std::string::npos) return std::nullopt;
  }
  char magic[2] = {};
  int fd = ::open(real_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  ssize_t n = ::read(fd, magic, sizeof magic);
  ::close(fd);
  if (n != 2 || (magic[0] == '#' && magic[1] == '!')) return std::nullopt;
  if (name.find("clang") != std::string::npos) return CompilerFamily::clang;
  if (name.find("icpx") != std::string::npos || name.find("icx") != std::string::npos)
    return CompilerFamily::intel;
  if (name.find("g++") != std::string::npos || name.find("gcc") != std::string::npos)
    return CompilerFamily::gcc;
  return std::nullopt;
}

CompilerFamily family_of_version(const std::string& version) {
  if (version.find("clang") != std::string::npos) return CompilerFamily::clang;
  if (version.find("Intel") != std::string::npos) return CompilerFamily::intel;
  return CompilerFamily::gcc;
}

// Identifies the compiler at an absolute path: by its file when that says which compiler it
// is, otherwise by asking it (`--version`, through the memo in `memo_dir` unless that is
// empty). Returns the reason it is unusable on failure.
std::optional<CompilerInfo> probe(const std::string& path, const std::string& memo_dir,
                                  std::string* why) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *why = path + " does not exist";
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    *why = path + " is not an executable file";
    return std::nullopt;
  }
  CompilerInfo info;
  info.path = path;
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  info.real_path = ec ? path : real.string();
  info.size = static_cast<uint64_t>(st.st_size);
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (std::optional<CompilerFamily> family = family_of_file(info.real_path)) {
    info.family = *family;
    return info;
  }

  std::string name = memo_dir.empty() ? "" : memo_name(path, info.real_path);
  std::string memo = name.empty() ? "" : memo_dir + "/" + name;
  if (!memo.empty()) {
    if (std::optional<std::string> version = read_memo(memo)) {
      ZC_LOG(cache) << "toolchain: " << path << " version from " << memo;
      info.version = std::move(*version);
      info.family = family_of_version(info.version);
      return info;
    }
  }

  ProcessResult r;
  try {
    r = run_process({path, "--version"});
  } catch (const Error& e) {
    *why = e.what();
    return std::nullopt;
  }
  std::string first_line = r.output.substr(0, r.output.find('\n'));
  if (r.exit_code != 0 || first_line.empty()) {
    *why = "`" + path + " --version` failed (exit status " + std::to_string(r.exit_code) + ")";
    return std::nullopt;
  }
  info.version = first_line;
  info.family = family_of_version(info.version);
  // A compiler replaced while it ran may have answered for the new file: keep no memo then,
  // since it would be filed under the old file's identity.
  if (!memo.empty() && memo_name(path, info.real_path) == name) {
    write_memo(memo_dir, memo, info.version);
  }
  return info;
}

struct Discovery {
  std::optional<CompilerInfo> info;
  std::string error;  // non-empty: raise this instead
};

const Discovery& process_discovery() {
  static const Discovery d = [] {
    Discovery r;
    try {
      r.info = discover_cxx(CompilerSearch::from_env());
    } catch (const Error& e) {
      r.error = e.what();
    }
    return r;
  }();
  return d;
}

std::string truncated(const std::string& text) {
  if (text.size() <= kMaxReportedOutput) return text;
  return text.substr(0, kMaxReportedOutput) + "\n... (" +
         std::to_string(text.size() - kMaxReportedOutput) + " more bytes of compiler output)";
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

const char* family_name(CompilerFamily f) {
  switch (f) {
    case CompilerFamily::gcc:
      return "gcc";
    case CompilerFamily::clang:
      return "clang";
    case CompilerFamily::intel:
      return "intel";
  }
  return "?";
}

std::string CompilerInfo::identity() const {
  return "cxx{path=" + path + ";real=" + real_path + ";family=" + family_name(family) +
         (version.empty() ? "" : ";version=" + version) + ";size=" + std::to_string(size) +
         ";mtime_ns=" + std::to_string(mtime_ns) + "}";
}

CompilerSearch CompilerSearch::from_env() {
  std::optional<std::string> cache_dir = persistent_cache_dir();
  return {env::non_empty(env::Var::cxx), env::non_empty(env::Var::make_cxx),
          env::non_empty(env::Var::path).value_or("/usr/bin:/bin"),
          cache_dir ? *cache_dir + "/toolchain" : ""};
}

std::optional<CompilerInfo> discover_cxx(const CompilerSearch& search) {
  std::string why;
  if (search.zc_cxx && !search.zc_cxx->empty()) {
    const std::string& v = *search.zc_cxx;
    std::optional<std::string> path = locate(v, search.path);
    if (!path) {
      throw Error("ZC_CXX=" + v +
                  ": no such program on PATH; set ZC_CXX to the path of a C++ "
                  "compiler (or unset it to use CXX, then c++)");
    }
    if (auto info = probe(*path, search.memo_dir, &why)) return info;
    throw Error("ZC_CXX=" + v + " cannot be used as the C++ compiler: " + why +
                "; set ZC_CXX to the path of a working C++ compiler (or unset it to use CXX, "
                "then c++)");
  }
  std::vector<std::string> names;
  if (search.cxx && !search.cxx->empty()) names.push_back(*search.cxx);
  for (const char* n : {"c++", "g++", "clang++"}) names.emplace_back(n);
  for (const auto& name : names) {
    std::optional<std::string> path = locate(name, search.path);
    if (!path) continue;
    if (auto info = probe(*path, search.memo_dir, &why)) return info;
  }
  return std::nullopt;
}

std::optional<CompilerInfo> find_cxx() {
  const Discovery& d = process_discovery();
  if (!d.error.empty()) throw Error(d.error);
  return d.info;
}

bool compiler_available() {
  return find_cxx().has_value();
}

ProcessResult run_process(const std::vector<std::string>& argv) {
  if (argv.empty()) throw Error("run_process: empty command line");
  // O_CLOEXEC on both ends keeps this pipe out of children that other threads spawn
  // meanwhile; otherwise one of them could hold the write end open and our read never ends.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(std::string("cannot create a pipe to run ") + argv[0] + ": " +
                std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw Error("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  // Best effort: a process that may not lower its children's priority builds at its own.
  if (const int nice = compiler_niceness()) (void)::setpriority(PRIO_PROCESS, pid, nice);
  ProcessResult result;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    // Keep draining past the cap so the child never blocks on a full pipe.
    size_t room = kMaxProcessOutput - std::min(kMaxProcessOutput, result.output.size());
    result.output.append(buf, std::min(room, static_cast<size_t>(n)));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error("waiting for " + argv[0] + ": " + std::strerror(errno));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string unique_file_stem() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t seed = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  auto pid = static_cast<uint64_t>(::getpid());
  uint64_t r = mix64(seed ^ mix64(n ^ (pid << 40)));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return "zc_" + std::to_string(pid) + "_" + std::to_string(n) + "_" + hex;
}

int sweep_work_dir(const std::string& dir, int keep_failed_days) {
  int removed = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // zc_<pid>_<counter>_<random>.<ext>
    if (name.rfind("zc_", 0) != 0) continue;
    char* after = nullptr;
    long pid = std::strtol(name.c_str() + 3, &after, 10);
    if (pid <= 0 || after == name.c_str() + 3 || *after != '_') continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // still running
    // The age also protects a process of another PID namespace sharing this directory (a
    // container), whose pid means nothing here: no compile takes an hour.
    std::error_code e;
    auto age = now - fs::last_write_time(it->path(), e);
    auto keep = it->path().extension() == ".cpp" ? std::chrono::hours(24) * keep_failed_days
                                                 : std::chrono::hours(1);
    if (e || age < keep) continue;
    if (fs::remove(it->path(), e)) ++removed;
  }
  return removed;
}

std::string default_work_dir() {
  std::string base = env::non_empty(env::Var::tmpdir).value_or("/tmp");
  std::string dir = base + "/zc-" + std::to_string(::getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error("cannot create the work directory " + dir + ": " + std::strerror(errno) +
                "; set TMPDIR to a writable directory");
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) {
    throw Error("the work directory " + dir +
                " is not a directory owned by this user, so files compiled there could be "
                "replaced by someone else; remove it or set TMPDIR to a private directory");
  }
  static std::once_flag swept;
  std::call_once(swept, [&] {
    int n = sweep_work_dir(dir);
    if (n) ZC_LOG(timing) << "toolchain: removed " << n << " files left in " << dir;
  });
  return dir;
}

namespace {

std::string prepared_work_dir(const std::string& work_dir) {
  std::string dir = work_dir.empty() ? default_work_dir() : work_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw Error("cannot create the compile directory " + dir + ": " + ec.message() +
                "; choose a writable directory");
  }
  return dir;
}

// Runs one compiler command that should produce `output`; on failure removes it and raises
// with the command, the compiler's output and `kept` (the source, which stays).
ProcessResult run_compiler(const CompilerInfo& cxx, const std::vector<std::string>& argv,
                           const std::string& output, const std::string& kept) {
  ProcessResult r;
  try {
    r = run_process(argv);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; the C++ compiler from " + cxx.path +
                " could not be started (set ZC_CXX to a working compiler). Source kept at " + kept);
  }
  std::error_code ec;
  if (r.exit_code != 0 || !fs::is_regular_file(output, ec)) {
    ::unlink(output.c_str());
    throw Error("the C++ compiler failed on generated code (exit status " +
                std::to_string(r.exit_code) + ").\ncommand: " + join(argv) + "\n" +
                truncated(r.output) + "\nThe source is kept at " + kept +
                "; this is a zc bug: please report it with this message and that file.");
  }
  return r;
}

}  // namespace

CompileResult compile_shared_object(const CompilerInfo& cxx, const Target& target,
                                    std::string_view source, const std::string& work_dir,
                                    bool keep_source) {
  std::string stem = prepared_work_dir(work_dir) + "/" + unique_file_stem();
  CompileResult result;
  result.so_path = stem + ".so";
  result.source_path = stem + ".cpp";
  write_new_file(result.source_path, source);

  std::vector<std::string> argv{cxx.path};
  argv.insert(argv.end(), target.flags.begin(), target.flags.end());
  argv.insert(argv.end(), {"-o", result.so_path, result.source_path});
  argv.insert(argv.end(), target.libs.begin(), target.libs.end());
  Timer timer;
  ProcessResult r = run_compiler(cxx, argv, result.so_path, result.source_path);
  result.seconds = timer.seconds();
  result.compiler_stderr = std::move(r.output);
  if (!keep_source) {
    ::unlink(result.source_path.c_str());
    result.source_path.clear();
  }
  ZC_LOG(timing) << "toolchain: compiled " << result.so_path << " in " << result.seconds * 1e3
                 << " ms";
  return result;
}

CompileResult compile_shared_object_units(const CompilerInfo& cxx, const Target& target,
                                          std::span<const std::string> units,
                                          const std::string& work_dir) {
  ZC_CHECK(!units.empty(), "compile_shared_object_units: no units");
  if (units.size() == 1) return compile_shared_object(cxx, target, units[0], work_dir);
  std::string stem = prepared_work_dir(work_dir) + "/" + unique_file_stem();
  std::vector<std::string> sources, objects;
  for (size_t i = 0; i < units.size(); ++i) {
    sources.push_back(stem + "_" + std::to_string(i) + ".cpp");
    objects.push_back(stem + "_" + std::to_string(i) + ".o");
    write_new_file(sources.back(), units[i]);
  }
  Timer timer;
  std::vector<std::future<ProcessResult>> compiles;
  for (size_t i = 0; i < units.size(); ++i) {
    std::vector<std::string> argv{cxx.path};
    argv.insert(argv.end(), target.flags.begin(), target.flags.end());
    argv.insert(argv.end(), {"-c", "-o", objects[i], sources[i]});
    compiles.push_back(std::async(std::launch::async, [&cxx, argv, &objects, &sources, i] {
      return run_compiler(cxx, argv, objects[i], sources[i]);
    }));
  }
  CompileResult result;
  std::exception_ptr failed;
  for (auto& c : compiles) {
    try {
      result.compiler_stderr += c.get().output;
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  auto remove_all = [&](bool keep_sources) {
    for (size_t i = 0; i < units.size(); ++i) {
      ::unlink(objects[i].c_str());
      if (!keep_sources) ::unlink(sources[i].c_str());
    }
  };
  if (failed) {
    remove_all(true);
    std::rethrow_exception(failed);
  }
  result.so_path = stem + ".so";
  std::vector<std::string> link{cxx.path};
  link.insert(link.end(), target.flags.begin(), target.flags.end());
  link.insert(link.end(), {"-o", result.so_path});
  link.insert(link.end(), objects.begin(), objects.end());
  link.insert(link.end(), target.libs.begin(), target.libs.end());
  try {
    result.compiler_stderr += run_compiler(cxx, link, result.so_path, sources[0]).output;
  } catch (...) {
    remove_all(true);
    throw;
  }
  remove_all(false);
  result.seconds = timer.seconds();
  ZC_LOG(timing) << "toolchain: compiled " << result.so_path << " from " << units.size()
                 << " units side by side in " << result.seconds * 1e3 << " ms";
  return result;
}

}  // namespace zc::toolchain
