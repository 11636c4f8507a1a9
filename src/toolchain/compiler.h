// The system C++ compiler: finding it, naming it for cache keys, and running it on generated
// source to produce a shared object.
//
// Discovery order: ZC_CXX, then CXX, then `c++`, `g++`, `clang++` on PATH. Each value is a
// path (anything with a '/') or a program name looked up on PATH; arguments are not
// supported. A ZC_CXX that cannot be used is an error, never a silent fallback, because the
// user asked for that compiler by name. An unusable CXX is skipped: it is a general build
// variable that often holds things zc cannot run (a wrapper with arguments, a cross compiler).
//
// The compiler runs as a child process (posix_spawn, no shell), so nothing in the source or
// the paths is ever interpreted by a shell.
//
// A compiler is named in cache keys by its file, without running it: the path as found, the
// file it resolves to, that file's size and mtime, and the family its name gives (g++-12,
// x86_64-linux-gnu-g++-12: gcc; clang++-14: clang; icpx: Intel). Running it (`--version`) costs
// a process spawn, 1.5 ms at best and 6 ms or more beside a busy first call, which was most of
// a start on a new machine that finds every graph in a remote cache. The file identifies the
// compiler as well as its answer would: an upgrade or a rebuild replaces the file; this is
// ccache's default (compiler_check=mtime), and packaged compilers have equal size and mtime on
// every machine, so their keys are shared across a fleet.
//
// A file that does not say which compiler it is gets asked, and its `--version` line joins the
// identity: a script (#!), a wrapper (ccache, sccache, distcc, icecc), or a name with no family
// in it (a file named c++). That answer is memoized on disk, keyed by the stat identity (device,
// inode, size, mtime and ctime in ns) of both the path as found and the file it resolves to,
// plus both paths. Replacing, rebuilding, upgrading or touching the wrapper, or repointing a
// symlink, changes the key and it is asked again. The limit: a wrapper whose underlying
// compiler changes while the wrapper file itself stays the same is not noticed. Touching the
// wrapper (or removing the memo directory) renews the memo; ZC_FORCE_DISABLE_CACHES=1 neither
// reads nor writes it, so every process asks.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "toolchain/target.h"

namespace zc::toolchain {

// Which options the compiler takes (target.h): gcc's, or clang's (which Intel's icpx shares).
enum class CompilerFamily : uint8_t { gcc, clang, intel };
const char* family_name(CompilerFamily f);

struct CompilerInfo {
  // Absolute path of the compiler as found, symlinks kept: it is what gets executed, since
  // drivers such as clang++ or a ccache link decide what to be from the name they are run as.
  std::string path;
  // `path` with every symlink resolved: the file whose size and mtime are recorded.
  std::string real_path;
  CompilerFamily family = CompilerFamily::gcc;
  // First line of `<path> --version` for a compiler that had to be asked (see above); empty
  // for one known by its file.
  std::string version;
  uint64_t size = 0;
  int64_t mtime_ns = 0;

  // All of the above in one stable string, for cache keys: an upgrade or a rebuild of the
  // compiler changes its size or mtime (or its answer) and so the identity.
  std::string identity() const;
};

// The environment that discovery reads, passed explicitly so tests can try any combination
// without touching the process environment or the process-wide result.
struct CompilerSearch {
  std::optional<std::string> zc_cxx;  // ZC_CXX; unset or empty means not given
  std::optional<std::string> cxx;     // CXX; unset or empty means not given
  std::string path;                   // PATH
  // Directory of the `--version` memo files (created when missing); empty: no memo, always
  // probe. from_env() gives <persistent cache dir>/toolchain, or empty when caches are off.
  std::string memo_dir;

  static CompilerSearch from_env();
};

// Finds and probes a compiler without the process-wide cache: a stat, then the memo in
// search.memo_dir (tens of microseconds), else `--version` (milliseconds), whose answer is then
// written to the memo. A memo that cannot be read or written only costs the probe.
// Returns nullopt when no candidate is usable. Raises zc::Error naming ZC_CXX when ZC_CXX is
// given but does not exist, is not executable, or fails `--version`.
std::optional<CompilerInfo> discover_cxx(const CompilerSearch& search);

// discover_cxx(CompilerSearch::from_env()), computed once per process (thread-safe). An error
// is remembered too and raised again on every call.
std::optional<CompilerInfo> find_cxx();

// True when find_cxx() finds a compiler, false when none is installed. Raises find_cxx()'s
// error for a bad ZC_CXX, so a misconfiguration is never mistaken for "no compiler".
bool compiler_available();

struct ProcessResult {
  int exit_code = 0;   // the exit status, or 128 + the signal number when it was killed
  std::string output;  // stdout and stderr interleaved, the first 1 MiB of it
};

// Runs argv[0] (an absolute path) with argv, stdin from /dev/null, and waits for it. Safe to
// call from many threads at once: no descriptor of one call leaks into another's child.
// Raises zc::Error when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv);

struct CompileResult {
  std::string so_path;      // the shared object; the caller owns it and removes it when done
  std::string source_path;  // the source if it was kept, else empty
  double seconds = 0;       // wall time of the compiler process
  // What the compiler printed on success (usually nothing: generated code is compiled with -w).
  // Not named `stderr`, which is a macro in some C libraries.
  std::string compiler_stderr;
};

// Compiles `source` into a shared object in `work_dir` (created if missing; empty means
// default_work_dir()). Files get names unique across threads and processes (pid, counter and
// random bits), so any number of compiles may run at once on one directory. The source is
// removed after a successful compile unless `keep_source`.
// Raises zc::Error when the compiler fails; the message holds the command, the compiler's
// output (the first 4 KiB) and the path of the source, which is then always kept so it can be
// reported. Also raises zc::Error when the work directory or the source cannot be written.
CompileResult compile_shared_object(const CompilerInfo& cxx, const Target& target,
                                    std::string_view source, const std::string& work_dir,
                                    bool keep_source = false);

// The same from several units (each a whole source: its own copy of what the kernels share,
// then some of them), compiled side by side into objects and linked into one shared object:
// a graph with many kernels then compiles in the time of its largest unit rather than of all
// of them. One unit is compile_shared_object. Sources are kept only when a step fails.
CompileResult compile_shared_object_units(const CompilerInfo& cxx, const Target& target,
                                          std::span<const std::string> units,
                                          const std::string& work_dir);

// A private directory for intermediate files: $TMPDIR/zc-<uid> (or /tmp/zc-<uid>), created
// with mode 0700. Raises zc::Error when it exists but is not a directory owned by this user,
// since another user could then swap the files zc is about to load. The first call of a
// process also sweeps it (sweep_work_dir).
std::string default_work_dir();

// Removes what earlier processes left in `dir`: files of processes that are gone (killed in
// the middle of a compile) once they are an hour old, and the sources kept for a compiler
// failure once they are `keep_failed_days` old (until then they can be reported). Files of a
// live process, and anything not named by unique_file_stem(), are never touched. Returns how
// many were removed.
int sweep_work_dir(const std::string& dir, int keep_failed_days = 7);

// A file name stem ("zc_<pid>_<counter>_<random>") unique across threads and processes.
std::string unique_file_stem();

}  // namespace zc::toolchain
