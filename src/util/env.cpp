#include "util/env.h"

#include <algorithm>
#include <array>
#include <cstdlib>

extern char** environ;

namespace zc::env {
namespace {

constexpr std::array kTable = {
    Variable{Var::logs, "ZC_LOGS",
             "what to log to stderr: cache, graph, output_code, timing, recompiles, regions, "
             "fusion, kernels, roi, accuracy, or all (every topic but kernels and roi)"},
    Variable{Var::accuracy_check, "ZC_ACCURACY_CHECK",
             "N: run eager beside the compiled code on the first N calls of each compiled graph "
             "and name the first diverging kernel"},
    Variable{Var::cache_dir, "ZC_CACHE_DIR",
             "the local cache; default $XDG_CACHE_HOME/zerocompile, else ~/.cache/zerocompile"},
    Variable{Var::cache_max_bytes, "ZC_CACHE_MAX_BYTES",
             "size cap of the local cache, least recently used evicted"},
    Variable{
        Var::force_disable_caches, "ZC_FORCE_DISABLE_CACHES",
        "1: every persistent cache off (for measuring cold starts, or ruling out a bad cache)"},
    Variable{Var::cache_hmac_key_file, "ZC_CACHE_HMAC_KEY_FILE",
             "sign bundles on save; require and verify signatures on load"},
    Variable{Var::cache_lock_ms, "ZC_CACHE_LOCK_MS",
             "the longest wait in ms for another process's compile of the same graph on this "
             "machine (default 60000; 0: off)"},
    Variable{Var::remote_cache, "ZC_REMOTE_CACHE",
             "the shared Redis tier: redis://[user:pass@]host:port[/db]"},
    Variable{Var::remote_cache_readonly, "ZC_REMOTE_CACHE_READONLY",
             "1: a reader of the Redis tier that never writes"},
    Variable{Var::remote_cache_ttl, "ZC_REMOTE_CACHE_TTL",
             "seconds each entry written to the Redis tier lives (default 0: no expiry)"},
    Variable{Var::remote_cache_connect_timeout_ms, "ZC_REMOTE_CACHE_CONNECT_TIMEOUT_MS",
             "bound in ms on each connection attempt to the Redis tier (default 200)"},
    Variable{Var::remote_cache_timeout_ms, "ZC_REMOTE_CACHE_TIMEOUT_MS",
             "bound in ms on each command to the Redis tier (default 500)"},
    Variable{Var::remote_cache_lock_ms, "ZC_REMOTE_CACHE_LOCK_MS",
             "the Redis tier's compile lock: its lifetime and the longest wait for it in ms "
             "(default 60000; 0: off)"},
    Variable{Var::cxx, "ZC_CXX",
             "the C++ compiler for generated code; default CXX, then c++, g++, clang++"},
    Variable{Var::cpu_isa, "ZC_CPU_ISA",
             "native (default) or x86-64-v2, x86-64-v3, x86-64-v4 for portable generated code"},
    Variable{Var::cpu_gemm, "ZC_CPU_GEMM",
             "onednn (default) or openblas: the library of f32 CPU matmuls"},
    Variable{Var::cpu_conv, "ZC_CPU_CONV",
             "auto (default), direct, winograd or columns: how f32 CPU convolutions run"},
    Variable{Var::num_threads, "ZC_NUM_THREADS",
             "CPU threads for generated code, eager kernels and the GEMM libraries (default "
             "OpenMP's: OMP_NUM_THREADS or the cores)"},
    Variable{Var::cuda_conv, "ZC_CUDA_CONV",
             "cudnn: convolutions on a GPU through cuDNN rather than as columns and cuBLASLt "
             "products"},
    Variable{Var::cuda_prestart, "ZC_CUDA_PRESTART",
             "0: cuBLASLt starts when a compiled graph needs it, not early on a background thread"},
    Variable{Var::nvrtc_workers, "ZC_NVRTC_WORKERS",
             "N: helper processes that run NVRTC beside the process (default half the cores, at "
             "most 3; 0: every compile in process)"},
    Variable{Var::nvrtc_helper, "ZC_NVRTC_HELPER",
             "the NVRTC helper program, instead of the zc-nvrtc-helper beside libzc"},
    Variable{Var::sizes_first, "ZC_SIZES_FIRST",
             "background or inline: where a first call under Dynamic::Auto builds the size "
             "templates of a graph whose products go to a library"},
    Variable{Var::xdg_cache_home, "XDG_CACHE_HOME",
             "the local cache is $XDG_CACHE_HOME/zerocompile when ZC_CACHE_DIR is not set"},
    Variable{Var::home, "HOME",
             "the local cache is ~/.cache/zerocompile when neither ZC_CACHE_DIR nor "
             "XDG_CACHE_HOME is set"},
    Variable{Var::make_cxx, "CXX", "the C++ compiler for generated code when ZC_CXX is not set"},
    Variable{Var::path, "PATH", "where the C++ compiler for generated code is looked up"},
    Variable{Var::tmpdir, "TMPDIR",
             "where the work directory of generated code's compiles (zc-<uid>) is made; default "
             "/tmp"},
    Variable{Var::cuda_home, "CUDA_HOME",
             "where NVRTC, cuBLASLt and cuDNN are looked for first (then the toolkit the build "
             "found, /usr/local/cuda, LD_LIBRARY_PATH)"},
    Variable{Var::ld_library_path, "LD_LIBRARY_PATH",
             "where NVRTC, cuBLASLt and cuDNN are looked for after the CUDA toolkits"},
    Variable{Var::cuda_visible_devices, "CUDA_VISIBLE_DEVICES",
             "the GPUs the driver shows; named when it reports none"},
};

constexpr bool table_in_enum_order() {
  if (kTable.size() != static_cast<size_t>(Var::count)) return false;
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (kTable[i].var != static_cast<Var>(i)) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "one entry per Var, in Var's order");

constexpr std::string_view kPrefix = "ZC_";

// Levenshtein distance, for names of a few dozen letters.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const Variable> variables() {
  return kTable;
}

std::string_view name(Var v) {
  return kTable[static_cast<size_t>(v)].name;
}

std::optional<std::string> get(Var v) {
  // The table's names are literals, so the view is terminated.
  const char* value = std::getenv(name(v).data());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<std::string> non_empty(Var v) {
  std::optional<std::string> value = get(v);
  if (value && value->empty()) return std::nullopt;
  return value;
}

bool flag(Var v, bool when_unset) {
  const std::optional<std::string> value = non_empty(v);
  if (!value) return when_unset;
  return *value != "0";
}

bool known(std::string_view name) {
  return std::any_of(kTable.begin(), kTable.end(),
                     [&](const Variable& x) { return x.name == name; });
}

std::string_view closest_known(std::string_view name) {
  std::string_view best;
  size_t best_distance = 3;
  for (const Variable& x : kTable) {
    if (!x.name.starts_with(kPrefix)) continue;
    const size_t d = edit_distance(name, x.name);
    if (d < best_distance) {
      best = x.name;
      best_distance = d;
    }
  }
  return best;
}

std::vector<std::pair<std::string, std::string>> zc_variables_set() {
  std::vector<std::pair<std::string, std::string>> vars;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (!entry.starts_with(kPrefix)) continue;
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    vars.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  std::sort(vars.begin(), vars.end());
  return vars;
}

}  // namespace zc::env
