#include "util/cache_dir.h"

#include <cstdlib>

namespace zc {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

bool caches_force_disabled() {
  std::string off = env_or_empty("ZC_FORCE_DISABLE_CACHES");
  return !off.empty() && off != "0";
}

std::string configured_cache_dir() {
  std::string dir = env_or_empty("ZC_CACHE_DIR");
  if (!dir.empty()) return dir;
  std::string xdg = env_or_empty("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/zerocompile";
  std::string home = env_or_empty("HOME");
  return home.empty() ? "" : home + "/.cache/zerocompile";
}

std::optional<std::string> persistent_cache_dir() {
  if (caches_force_disabled()) return std::nullopt;
  std::string dir = configured_cache_dir();
  if (dir.empty()) return std::nullopt;
  return dir;
}

}  // namespace zc
