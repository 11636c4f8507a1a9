#include "cache/keys.h"

#include <cstdint>

#include "util/check.h"

namespace zc::cache {

Key& Key::add(std::string name, std::string value) {
  parts_.emplace_back(std::move(name), std::move(value));
  return *this;
}

Key& Key::made_for(const Provenance& p) {
  ZC_CHECK(!made_for_called_, "Key::made_for called twice on " << describe());
  made_for_called_ = true;
  provenance_ = p;
  if (!p.build_id.empty()) add("build", p.build_id);
  if (!p.target.empty()) add("target", p.target);
  if (!p.toolchain.empty()) add("toolchain", p.toolchain);
  return *this;
}

Digest Key::digest() const {
  // Length-prefixed fields: no choice of names and values can collide with another.
  Sha256 h;
  uint8_t lv = static_cast<uint8_t>(level_);
  h.update("zc-key-v1");
  h.update(&lv, 1);
  for (const auto& [name, value] : parts_) {
    uint64_t n = name.size(), v = value.size();
    h.update(&n, 8).update(name).update(&v, 8).update(value);
  }
  return h.finish();
}

std::string Key::describe() const {
  std::string out;
  for (const auto& [name, value] : parts_) {
    if (!out.empty()) out += ' ';
    out +=
        name + "=" + (value.size() > 80 ? "sha256:" + zc::hex(sha256(value)).substr(0, 16) : value);
  }
  return out;
}

}  // namespace zc::cache
