#include "cuda/blaslt_library.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>

#include "util/log.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {

struct Found {
  std::optional<toolchain::LibraryFile> file;
  std::string why;
};

const Found& found() {
  static const Found* const f = [] {
    auto* out = new Found();
    out->file = find_blaslt_in(toolchain::cuda_library_dirs(), &out->why);
    return out;
  }();
  return *f;
}

struct Loaded {
  BlasLt lt;
  std::string error;  // empty when usable
};

// Never destroyed, like the driver: a product queued while the process exits still finds it.
const Loaded& loaded() {
  static const Loaded* const l = [] {
    auto* out = new Loaded();
    const Found& f = found();
    if (!f.file) {
      out->error = f.why;
      return out;
    }
    try {
      const auto start = std::chrono::steady_clock::now();
      out->lt = load_blaslt(f.file->path);
      ZC_LOG(timing) << "cublaslt " << f.file->path << " loaded in "
                     << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                  start)
                            .count()
                     << " ms";
    } catch (const Error& e) {
      out->error = e.what();
    }
    return out;
  }();
  return *l;
}

std::atomic<bool> g_mapped{false};            // some load_blaslt() has mapped a library
std::atomic<const BlasLt*> g_ready{nullptr};  // blaslt() has succeeded

const char* status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

}  // namespace

const std::vector<std::string>& blaslt_file_names() {
  static const std::vector<std::string> names{"libcublasLt.so.13", "libcublasLt.so.12",
                                              "libcublasLt.so"};
  return names;
}

std::optional<toolchain::LibraryFile> find_blaslt_in(const std::vector<std::string>& dirs,
                                                     std::string* why) {
  auto file = toolchain::find_library_file(dirs, blaslt_file_names());
  if (!file && why) {
    std::string where;
    for (const std::string& d : dirs) where += (where.empty() ? "" : ", ") + d;
    *why =
        "cuBLASLt (libcublasLt.so.13, .12 or libcublasLt.so), which zc uses for matrix products "
        "on a GPU, was not found in " +
        (where.empty() ? std::string("any directory") : where) +
        "; install the CUDA toolkit's cuBLAS (CUDA 12 or 13) or set CUDA_HOME to a toolkit "
        "that has lib64/libcublasLt.so.13";
  }
  return file;
}

std::optional<toolchain::LibraryFile> find_blaslt(std::string* why) {
  const Found& f = found();
  if (!f.file && why) *why = f.why;
  return f.file;
}

bool blaslt_found(std::string* why) {
  return find_blaslt(why).has_value();
}

std::string blaslt_identity() {
  const Found& f = found();
  return f.file ? f.file->identity("cublaslt") : "";
}

BlasLt load_blaslt(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    throw Error("cuBLASLt at " + path + " could not be loaded: " + (err ? err : "dlopen failed") +
                "; reinstall the CUDA toolkit's cuBLAS or set CUDA_HOME to another toolkit");
  }
  g_mapped.store(true, std::memory_order_relaxed);
  BlasLt lt;
  lt.path = path;
  std::string missing;
#define ZC_BLASLT_RESOLVE(name)                                     \
  lt.name = reinterpret_cast<decltype(lt.name)>(dlsym(lib, #name)); \
  if (!lt.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  ZC_BLASLT_FUNCTIONS(ZC_BLASLT_RESOLVE)
#undef ZC_BLASLT_RESOLVE
  if (!missing.empty()) {
    // Left loaded: it may have started threads, and this process will not try it again.
    throw Error("cuBLASLt at " + path + " lacks " + missing +
                "; it is older than zc needs (CUDA 12 or newer): set CUDA_HOME to a newer "
                "toolkit");
  }
  lt.version = lt.cublasLtGetVersion();
  return lt;
}

const BlasLt& blaslt() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(l.error);
  g_ready.store(&l.lt, std::memory_order_release);
  return l.lt;
}

bool blaslt_loaded() {
  return g_mapped.load(std::memory_order_relaxed);
}

std::string blaslt_status_text(cublasStatus_t status) {
  std::string out =
      std::string(status_name(status)) + " (" + std::to_string(static_cast<int>(status)) + ")";
  // The library's own words, only once it is in use: describing an error must not load it.
  if (const BlasLt* lt = g_ready.load(std::memory_order_acquire)) {
    if (const char* text = lt->cublasLtGetStatusString(status)) out += ": " + std::string(text);
  }
  return out;
}

void raise_blaslt_error(cublasStatus_t status, std::string_view what) {
  throw Error(std::string(what) + " failed: " + blaslt_status_text(status));
}

}  // namespace zc::cuda
