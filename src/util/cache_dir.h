// Where zc keeps files across processes. Resolved from the environment in this one place so
// the compile cache and the smaller on-disk memos (the compiler probe) always agree on it.
//
//   ZC_FORCE_DISABLE_CACHES  set to anything but "" or "0": nothing is persisted
//   ZC_CACHE_DIR             the directory; default $XDG_CACHE_HOME/zerocompile, else
//                            $HOME/.cache/zerocompile (never /tmp, which is lost on reboot)
#pragma once

#include <optional>
#include <string>

namespace zc {

// True when ZC_FORCE_DISABLE_CACHES asks for no persistent caches.
bool caches_force_disabled();

// ZC_CACHE_DIR, else $XDG_CACHE_HOME/zerocompile, else $HOME/.cache/zerocompile; empty when
// none of these variables is set. Does not look at ZC_FORCE_DISABLE_CACHES, so a disabled
// cache can still be named (the CLI reports where it would be).
std::string configured_cache_dir();

// configured_cache_dir(), or nullopt when caches are force-disabled or no directory is known.
std::optional<std::string> persistent_cache_dir();

}  // namespace zc
