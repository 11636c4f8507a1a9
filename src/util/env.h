// Every environment variable zc reads, with what it means, and the one place that reads them.
// The rest of zc asks here by Var, never by name, so the table is complete by construction and
// `zc env` can point out a ZC_* variable that zc does not know: a misspelt one otherwise reads
// as the default, silently.
//
// Nothing is cached here. A caller that reads its variable once per process keeps its own
// static; the others see a setenv at once (tests rely on both).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zc::env {

// zc's own variables are named without their ZC_ prefix; those of the wider environment that zc
// honours keep their whole name (make_cxx is CXX, the make and CMake convention).
enum class Var {
  logs,
  accuracy_check,
  cache_dir,
  cache_max_bytes,
  force_disable_caches,
  cache_hmac_key_file,
  cache_lock_ms,
  remote_cache,
  remote_cache_readonly,
  remote_cache_ttl,
  remote_cache_connect_timeout_ms,
  remote_cache_timeout_ms,
  remote_cache_lock_ms,
  cxx,
  cpu_isa,
  cpu_gemm,
  cpu_conv,
  num_threads,
  cuda_conv,
  cuda_prestart,
  nvrtc_workers,
  nvrtc_helper,
  sizes_first,
  xdg_cache_home,
  home,
  make_cxx,
  path,
  tmpdir,
  cuda_home,
  ld_library_path,
  cuda_visible_devices,
  count
};

struct Variable {
  Var var;
  std::string_view name;
  std::string_view meaning;  // one line; the README's table says more
};

// The table, in Var's order.
std::span<const Variable> variables();

std::string_view name(Var v);

// The value; nullopt when the variable is not set. Set but empty stays "": for some variables
// that is a value of its own (CUDA_VISIBLE_DEVICES= hides every device).
std::optional<std::string> get(Var v);

// The value, or nullopt when unset or empty: most of zc's variables mean their default then.
std::optional<std::string> non_empty(Var v);

// On or off: `when_unset` when unset or empty, off for "0", on for anything else.
bool flag(Var v, bool when_unset = false);

// Whether `name` is in the table.
bool known(std::string_view name);

// The ZC_* name in the table that `name` is most likely a misspelling of (at most two letters
// added, dropped or changed), or "" when none is that close.
std::string_view closest_known(std::string_view name);

// Every ZC_* variable set in this process, known or not, as (name, value) sorted by name.
std::vector<std::pair<std::string, std::string>> zc_variables_set();

}  // namespace zc::env
