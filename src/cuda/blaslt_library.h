// cuBLASLt, the library: found by its file and opened at run time, like NVRTC. It is several
// hundred MB, so it is loaded (dlopen) only by the first matrix product that needs it; a process
// that never multiplies large matrices on a GPU never maps it, yet it can name the library in
// cache keys (blaslt_found, find_blaslt) from the start.
//
// The file: libcublasLt.so.13, then .12, then libcublasLt.so, in the directories every CUDA
// library is looked for (cuda_library_dirs()). Loading needs no GPU; creating a handle does.
//
// Members of the table are named and called as the functions of <cublasLt.h> are:
// blaslt().cublasLtMatmul(...). Once loaded, the library is never unloaded and the table never
// changes, so it stays usable while the process exits.
#pragma once

#include <cublasLt.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toolchain/library_file.h"

// X(name) for every cuBLASLt function zc uses.
#define ZC_BLASLT_FUNCTIONS(X)            \
  X(cublasLtCreate)                       \
  X(cublasLtGetVersion)                   \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutSetAttribute)     \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

namespace zc::cuda {

struct BlasLt {
#define ZC_BLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  ZC_BLASLT_FUNCTIONS(ZC_BLASLT_MEMBER)
#undef ZC_BLASLT_MEMBER
  size_t version = 0;  // cublasLtGetVersion: 130100 for 13.1.0
  std::string path;    // the file it was loaded from
};

// The file names tried in each directory, in order.
const std::vector<std::string>& blaslt_file_names();

// The library's file in `dirs` (the first name of blaslt_file_names() found in the first
// directory holding one), without loading it; nullopt with the reason in `why` (the names, the
// places looked at and what to do) when there is none.
std::optional<toolchain::LibraryFile> find_blaslt_in(const std::vector<std::string>& dirs,
                                                     std::string* why = nullptr);

// The same over cuda_library_dirs(), searched once per process (thread-safe); never loads it.
std::optional<toolchain::LibraryFile> find_blaslt(std::string* why = nullptr);
bool blaslt_found(std::string* why = nullptr);
// "cublaslt{path=...;file=...;size=...;mtime_ns=...}" for cache keys; empty when not found.
std::string blaslt_identity();

// Loads the library at `path` and resolves every function; a zc::Error naming the file, and
// what it lacks, when it cannot be loaded or is too old.
BlasLt load_blaslt(const std::string& path);

// The process's library, loaded on the first call (from any thread); a zc::Error saying why
// and what to do when it is missing or unusable, raised again by every call after.
const BlasLt& blaslt();
// Whether this process has mapped a cuBLASLt library (through blaslt() or load_blaslt()); asking
// never loads it.
bool blaslt_loaded();

// "CUBLAS_STATUS_NOT_SUPPORTED (15): the functionality requested is not supported".
std::string blaslt_status_text(cublasStatus_t status);
[[noreturn]] void raise_blaslt_error(cublasStatus_t status, std::string_view what);
// Raises zc::Error with `what` and the status unless it is CUBLAS_STATUS_SUCCESS.
inline void check_blaslt(cublasStatus_t status, std::string_view what) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    raise_blaslt_error(status, what);
}

}  // namespace zc::cuda
