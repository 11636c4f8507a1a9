#include "util/cache_dir.h"

#include "util/env.h"

namespace zc {

using env::Var;

bool caches_force_disabled() {
  return env::flag(Var::force_disable_caches);
}

std::string configured_cache_dir() {
  if (auto dir = env::non_empty(Var::cache_dir)) return *dir;
  if (auto xdg = env::non_empty(Var::xdg_cache_home)) return *xdg + "/zerocompile";
  auto home = env::non_empty(Var::home);
  return home ? *home + "/.cache/zerocompile" : "";
}

std::optional<std::string> persistent_cache_dir() {
  if (caches_force_disabled()) return std::nullopt;
  std::string dir = configured_cache_dir();
  if (dir.empty()) return std::nullopt;
  return dir;
}

}  // namespace zc
