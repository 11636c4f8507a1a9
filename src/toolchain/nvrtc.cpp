#include "toolchain/nvrtc.h"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <mutex>

#include "toolchain/compiler.h"
#include "toolchain/library_file.h"
#include "toolchain/nvrtc_workers.h"
#include "util/log.h"
#include "zc/error.h"

namespace zc::toolchain {

namespace {

// NVRTC's C interface, declared here rather than taken from <nvrtc.h> so that the toolchain
// builds without the CUDA toolkit: these signatures have been stable since NVRTC's first
// release, and the result codes are only compared with 0 (NVRTC_SUCCESS).
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct Api {
  nvrtcResult (*version)(int*, int*);
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                        const char* const*);
  nvrtcResult (*destroy)(nvrtcProgram*);
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*log_size)(nvrtcProgram, size_t*);
  nvrtcResult (*log)(nvrtcProgram, char*);
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*);
  nvrtcResult (*cubin)(nvrtcProgram, char*);
  const char* (*error_string)(nvrtcResult);
};

struct Loaded {
  Api api{};
  bool ok = false;
  std::string why;
};

struct Found {
  std::optional<NvrtcInfo> info;
  std::string why;
};

const std::vector<std::string> kNames{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

std::optional<NvrtcInfo> as_info(std::optional<LibraryFile> file) {
  if (!file) return std::nullopt;
  return NvrtcInfo{file->path, file->real_path, file->size, file->mtime_ns};
}

Found find() {
  Found f;
  if ((f.info = as_info(find_library_file(cuda_library_dirs(), kNames)))) return f;
  // Known to the loader only (its cache may list libraries no configured directory holds):
  // ask it once.
  for (const std::string& name : kNames) {
    void* lib = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (!lib) continue;
    void* sym = dlsym(lib, "nvrtcVersion");
    Dl_info dl{};
    if (sym && dladdr(sym, &dl) && dl.dli_fname &&
        (f.info = as_info(describe_library_file(dl.dli_fname))))
      return f;
  }
  f.why =
      "NVRTC (libnvrtc.so) was not found in $CUDA_HOME, /usr/local/cuda, $LD_LIBRARY_PATH "
      "or the system's library directories; install the CUDA toolkit's NVRTC or set "
      "CUDA_HOME to it";
  return f;
}

const Found& found() {
  static const Found f = find();
  return f;
}

template <class F>
bool bind(void* lib, const char* name, F*& out) {
  out = reinterpret_cast<F*>(dlsym(lib, name));
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  const Found& f = found();
  if (!f.info) {
    l.why = f.why;
    return l;
  }
  void* lib = dlopen(f.info->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    l.why = "NVRTC at " + f.info->path + " could not be loaded: " + (err ? err : "dlopen failed");
    return l;
  }
  Api& a = l.api;
  l.ok = bind(lib, "nvrtcVersion", a.version) && bind(lib, "nvrtcCreateProgram", a.create) &&
         bind(lib, "nvrtcDestroyProgram", a.destroy) &&
         bind(lib, "nvrtcCompileProgram", a.compile) &&
         bind(lib, "nvrtcGetProgramLogSize", a.log_size) &&
         bind(lib, "nvrtcGetProgramLog", a.log) && bind(lib, "nvrtcGetCUBINSize", a.cubin_size) &&
         bind(lib, "nvrtcGetCUBIN", a.cubin) && bind(lib, "nvrtcGetErrorString", a.error_string);
  if (!l.ok) {
    l.why = "the NVRTC library at " + f.info->path +
            " lacks nvrtcGetCUBIN and friends (too old: CUDA 11.1 or newer is needed)";
  }
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

std::string program_log(const Api& a, nvrtcProgram prog) {
  size_t n = 0;
  if (a.log_size(prog, &n) != 0 || n <= 1) return "";
  std::string s(n, '\0');
  if (a.log(prog, s.data()) != 0) return "";
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
  return s;
}

// The source of a rejected program, where it can be read after the process is gone.
std::string keep_source(std::string_view source) {
  try {
    std::string path = default_work_dir() + "/" + unique_file_stem() + ".cu";
    std::ofstream(path) << source;
    return path;
  } catch (const Error&) {
    return "(not kept: no work directory)";
  }
}

}  // namespace

std::string NvrtcInfo::identity() const {
  return "nvrtc{path=" + path + ";file=" + real_path + ";size=" + std::to_string(size) +
         ";mtime_ns=" + std::to_string(mtime_ns) + "}";
}

std::optional<NvrtcInfo> find_nvrtc(std::string* why) {
  const Found& f = found();
  if (!f.info && why) *why = f.why;
  return f.info;
}

std::string nvrtc_version() {
  const Loaded& l = loaded();
  int major = 0, minor = 0;
  if (!l.ok || l.api.version(&major, &minor) != 0) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcOutcome nvrtc_compile_here(std::string_view source, const std::string& arch,
                                const std::vector<std::string>& options) {
  NvrtcOutcome out;
  if (!loaded().ok) {
    out.stage = NvrtcOutcome::Stage::create;
    out.detail = loaded().why;
    return out;
  }
  const Api& a = loaded().api;
  auto start = std::chrono::steady_clock::now();
  std::string text(source);
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = a.create(&prog, text.c_str(), "zc_generated.cu", 0, nullptr, nullptr)) {
    out.stage = NvrtcOutcome::Stage::create;
    out.detail = a.error_string(r);
    return out;
  }
  struct Destroy {
    const Api& a;
    nvrtcProgram* p;
    ~Destroy() { a.destroy(p); }
  } destroy{a, &prog};
  std::vector<std::string> opts{"--gpu-architecture=" + arch};
  opts.insert(opts.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcResult r = a.compile(prog, static_cast<int>(argv.size()), argv.data());
  out.result.log = program_log(a, prog);
  if (r != 0) {
    out.stage = NvrtcOutcome::Stage::compile;
    out.detail = a.error_string(r);
    return out;
  }
  size_t n = 0;
  if (a.cubin_size(prog, &n) != 0 || n == 0) {
    out.stage = NvrtcOutcome::Stage::no_cubin;
    return out;
  }
  out.result.cubin.resize(n);
  if (a.cubin(prog, reinterpret_cast<char*>(out.result.cubin.data())) != 0) {
    out.stage = NvrtcOutcome::Stage::handover;
    return out;
  }
  out.result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

namespace {

// Held by every compile in this process, which NVRTC runs one at a time anyway: a compile that
// finds it taken goes to a helper process if one is idle (nvrtc_workers.h).
std::mutex& here_mutex() {
  static std::mutex mu;
  return mu;
}

// Notified whenever a compile ends, here or in a helper: what waiting compiles wait for.
// `ended` counts the ends, so that a waiter that looked before an end and waits after it does
// not sleep through it.
struct CompileEnded {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t ended = 0;
};
CompileEnded& compile_ended() {
  static CompileEnded e;
  return e;
}

}  // namespace

CubinResult compile_cubin(std::string_view source, const std::string& arch,
                          const std::vector<std::string>& options) {
  const Loaded& l = loaded();
  if (!l.ok) throw Error(l.why);
  // The helpers start now unless a CUDA context started them (nvrtc_workers.h).
  start_nvrtc_helpers(arch, options);
  // This process's NVRTC when it is free, else an idle helper, else whichever frees first.
  std::optional<NvrtcOutcome> done;
  const char* where = "";
  for (;;) {
    uint64_t seen = 0;
    {
      std::lock_guard lock(compile_ended().mu);
      seen = compile_ended().ended;
    }
    std::unique_lock here(here_mutex(), std::try_to_lock);
    if (!here.owns_lock() && nvrtc_workers().size() == 0) here.lock();  // no helper to wait for
    if (here.owns_lock()) {
      done = nvrtc_compile_here(source, arch, options);
      break;
    }
    if ((done = nvrtc_workers().try_compile(source, arch, options))) {
      where = " (in a helper process)";
      break;
    }
    // Every one is busy: wait until a compile ends, or a while, for a helper that becomes
    // ready meanwhile (the pool says nothing when one does).
    std::unique_lock lock(compile_ended().mu);
    compile_ended().cv.wait_for(lock, std::chrono::milliseconds(2),
                                [&] { return compile_ended().ended != seen; });
  }
  {
    std::lock_guard lock(compile_ended().mu);
    ++compile_ended().ended;
  }
  compile_ended().cv.notify_all();
  NvrtcOutcome& r = *done;
  std::string cmd = " --gpu-architecture=" + arch;
  for (const std::string& o : options) cmd += " " + o;
  switch (r.stage) {
    case NvrtcOutcome::Stage::ok:
      break;
    case NvrtcOutcome::Stage::create:
      throw Error("NVRTC could not create a program: " + r.detail);
    case NvrtcOutcome::Stage::compile: {
      const std::string& log = r.result.log;
      throw Error("NVRTC rejected generated CUDA source (" + r.detail + "; options:" + cmd +
                  "):\n" + (log.size() > 4096 ? log.substr(0, 4096) + "\n[...]" : log) +
                  "\nsource kept at " + keep_source(source));
    }
    case NvrtcOutcome::Stage::no_cubin:
      throw Error("NVRTC made no cubin for " + arch +
                  " (a virtual architecture such as compute_90 gives PTX only; name a real one)");
    case NvrtcOutcome::Stage::handover:
      throw Error("NVRTC could not hand over the cubin");
  }
  ZC_LOG(timing) << "nvrtc " << arch << ": " << r.result.seconds * 1000 << " ms, "
                 << r.result.cubin.size() << " bytes of cubin" << where;
  return std::move(r.result);
}

}  // namespace zc::toolchain
