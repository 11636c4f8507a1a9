// SHA-256 (cache keys and graph hashes: a writer must not be able to craft a collision) and a
// fast non-cryptographic 64-bit mix for in-process hash tables.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace zc {

using Digest = std::array<uint8_t, 32>;
std::string hex(const Digest& d);
std::string hex(std::span<const uint8_t> bytes);

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256& update(const void* data, size_t n);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  Digest finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

Digest sha256(std::span<const uint8_t> bytes);
Digest sha256(std::string_view s);

// HMAC-SHA256 (RFC 2104) of the concatenation of `parts`: the signature of bundles and remote
// entries.
Digest hmac_sha256(std::span<const uint8_t> key,
                   std::initializer_list<std::span<const uint8_t>> parts);
inline Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data) {
  return hmac_sha256(key, {data});
}
// Equality whose time does not depend on where the inputs differ, for comparing MACs.
bool equal_constant_time(std::span<const uint8_t> a, std::span<const uint8_t> b);

// 64-bit mixing (splitmix64 finalizer); combine with hash_combine.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t hash_combine(uint64_t seed, uint64_t v) {
  return mix64(seed ^ mix64(v));
}

}  // namespace zc
