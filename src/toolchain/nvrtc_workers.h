// Helper processes that run NVRTC beside this one.
//
// NVRTC compiles one program at a time per process: N programs given on N threads finish one
// after another (measured on the H100 host: eight copies of a 10 ms program on eight threads
// took 91 ms, the last at 9x the first), while N processes compile side by side (three sources
// of 14-35 ms in three processes at once: each within 1.2x of its time alone). The distinct
// parts of a hierarchical compile, and the size templates of a model's parts, queued behind
// each other in one NVRTC. So a compile that finds this process's NVRTC busy goes to an idle
// helper: the program `zc-nvrtc-helper`, which runs NVRTC for whoever started it and nothing
// else, over a socket.
//
// Contract:
//  - Helpers are new processes (posix_spawn), not forks of this one: NVRTC forked from a
//    process whose NVRTC had compiled took 1.2-1.9 s per program in the child, against 30 ms.
//  - start() spawns them at most once per pool and returns at once; each helper compiles an
//    empty program first (NVRTC's start in a process), then says it is ready. A helper that
//    has not said so is not idle. They start when a CUDA context is made (cuda/device.cpp),
//    so that they are ready when the first graph's parts compile, or else at the first compile.
//  - try_compile() hands a program to an idle, ready helper and waits for its answer; nullopt
//    when none is, or when the helper died or garbled its answer (it is then dropped), so the
//    caller compiles in its own process. Results equal those of this process's NVRTC: the same
//    library, options and source. A fork of this process compiles in its own: the helpers'
//    sockets are shared with the parent, so only the process that started them uses them.
//  - Helpers end when their socket closes: when this process exits or the pool is destroyed.
//    Their stdio is /dev/null, and they close every other descriptor they inherited but their
//    socket.
//  - ZC_NVRTC_WORKERS=N sets how many (default: half the cores, at most 7); 0: none. The
//    program is found where ZC_NVRTC_HELPER names, else beside libzc (the build tree), else in
//    libexec/zc/ of libzc's install; without it, every compile runs in process.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toolchain/nvrtc.h"

namespace zc::toolchain {

// What one NVRTC compile gave, as plain data: a helper sends it back over its socket, and the
// caller turns a failure into its zc::Error.
struct NvrtcOutcome {
  enum class Stage : uint8_t { ok, create, compile, no_cubin, handover };
  Stage stage = Stage::ok;
  std::string detail;  // NVRTC's error string when stage != ok
  CubinResult result;  // log always; cubin and seconds when ok
};

using NvrtcCompileFn = NvrtcOutcome (*)(std::string_view source, const std::string& arch,
                                        const std::vector<std::string>& options);

// One compile by this process's NVRTC, as plain data (toolchain/nvrtc.cpp; compile_cubin
// turns it into a result or a zc::Error). The caller holds no lock: NVRTC serializes itself.
NvrtcOutcome nvrtc_compile_here(std::string_view source, const std::string& arch,
                                const std::vector<std::string>& options);

// How many helpers a process starts: ZC_NVRTC_WORKERS, else min(7, cores / 2).
size_t nvrtc_worker_count();
// The helper program's path, or empty when there is none (see the contract).
std::string nvrtc_helper_path();

// A helper's life, for its main(): on descriptor `fd`, compile an empty program for `warm_arch`
// with `warm_options`, say ready, then answer every request with `compile` until the socket
// closes. Returns the process's exit status.
int serve_nvrtc_requests(int fd, NvrtcCompileFn compile, const std::string& warm_arch,
                         const std::vector<std::string>& warm_options);

class NvrtcWorkers {
 public:
  NvrtcWorkers() = default;
  ~NvrtcWorkers();
  NvrtcWorkers(const NvrtcWorkers&) = delete;
  NvrtcWorkers& operator=(const NvrtcWorkers&) = delete;

  // Spawns `n` copies of `program` (argv: program, warm_arch, warm_options...), once per pool;
  // returns how many started (0 on a later call).
  size_t start(size_t n, const std::string& program, const std::string& warm_arch,
               const std::vector<std::string>& warm_options);
  std::optional<NvrtcOutcome> try_compile(std::string_view source, const std::string& arch,
                                          const std::vector<std::string>& options);
  // Helpers alive (ready or not), and their process ids (for tests).
  size_t size() const;
  std::vector<int> pids() const;

 private:
  struct Worker {
    int pid = -1;
    int fd = -1;
    bool ready = false;  // its ready byte was read
    bool busy = false;
  };
  mutable std::mutex mu_;
  int owner_ = -1;  // the process that started the helpers; -1: not started
  std::vector<Worker> workers_;
};

// This process's pool, started by start_nvrtc_helpers (idempotent; a no-op without NVRTC, the
// helper program or when ZC_NVRTC_WORKERS=0).
NvrtcWorkers& nvrtc_workers();
void start_nvrtc_helpers(const std::string& arch, const std::vector<std::string>& options);

}  // namespace zc::toolchain
