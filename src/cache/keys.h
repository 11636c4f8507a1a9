// Cache keys with named components. The key is the SHA-256 of every component, name and
// value; the components themselves are kept so that ZC_LOGS=cache can print them and two
// runs' logs can be diffed to see exactly which one changed when a lookup missed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cache/entry.h"

namespace zc::cache {

class Key {
 public:
  Key(Level level) : level_(level) {}  // NOLINT: a key starts from its level
  Key& add(std::string name, std::string value);
  Level level() const { return level_; }
  Digest digest() const;
  std::string hex() const { return zc::hex(digest()); }
  // "graph=ab12.. build=ff03.. target=native(...)": values longer than 80 chars are shown
  // as their SHA-256 prefix, so a line stays readable but still tells components apart.
  std::string describe() const;
  const std::vector<std::pair<std::string, std::string>>& components() const { return parts_; }

 private:
  Level level_;
  std::vector<std::pair<std::string, std::string>> parts_;
};

}  // namespace zc::cache
