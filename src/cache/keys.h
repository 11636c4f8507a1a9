// Cache keys with named components. The key is the SHA-256 of every component, name and
// value; the components themselves are kept so that ZC_LOGS=cache can print them and two
// runs' logs can be diffed to see exactly which one changed when a lookup missed.
//
// A key also says what its entries are made for (a Provenance): the cache stores it with
// every entry put under the key and refuses a stored entry that names another, so the cache
// itself never needs to know which build, target or compiler this process has.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cache/entry.h"

namespace zc::cache {

// What an entry was built for; an entry for another build, target or toolchain is refused. An
// empty field is one the entry does not depend on.
struct Provenance {
  std::string build_id;
  std::string target;     // target fingerprint (ISA level and, for native, the CPU)
  std::string toolchain;  // compiler identity; empty for entries that hold no binary

  bool operator==(const Provenance&) const = default;
};

class Key {
 public:
  Key(Level level) : level_(level) {}  // NOLINT: a key starts from its level
  Key& add(std::string name, std::string value);
  // Records what entries under this key are made for and appends its non-empty fields as the
  // components "build", "target" and "toolchain", in that order, so the key changes with them.
  // Once per key, after the other components.
  Key& made_for(const Provenance& p);
  const Provenance& provenance() const { return provenance_; }
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
  Provenance provenance_;
  bool made_for_called_ = false;
};

}  // namespace zc::cache
