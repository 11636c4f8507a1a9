#include "util/hash.h"

// OpenSSL's one-algorithm SHA-256 functions rather than EVP: the first EVP digest of a process
// loads OpenSSL's configuration and providers, about 1 ms, which was most of a warm start.
// These use the same assembly (SHA-NI where the CPU has it), keep no global state (so hashing
// during exit handlers is safe whatever OpenSSL has cleaned up) and allocate nothing. OpenSSL
// 3 marks them deprecated, not removed.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <algorithm>

#include "util/check.h"

namespace zc {

struct Sha256::State {
  SHA256_CTX ctx;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  ZC_CHECK(SHA256_Init(&state_->ctx) == 1, "SHA-256 init failed");
}

Sha256::~Sha256() = default;

Sha256& Sha256::update(const void* data, size_t n) {
  ZC_CHECK(SHA256_Update(&state_->ctx, data, n) == 1, "SHA-256 update failed");
  return *this;
}

Digest Sha256::finish() {
  Digest d;
  ZC_CHECK(SHA256_Final(d.data(), &state_->ctx) == 1, "SHA-256 final failed");
  return d;
}

// Not OpenSSL's one-shot SHA256(), which OpenSSL 3 routes through EVP.
Digest sha256(std::span<const uint8_t> bytes) {
  SHA256_CTX ctx;
  Digest d;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, bytes.data(), bytes.size());
  SHA256_Final(d.data(), &ctx);
  return d;
}
Digest sha256(std::string_view s) {
  return sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

Digest hmac_sha256(std::span<const uint8_t> key,
                   std::initializer_list<std::span<const uint8_t>> parts) {
  constexpr size_t kBlock = 64;
  uint8_t block[kBlock] = {};
  if (key.size() > kBlock) {
    Digest k = sha256(key);
    std::copy(k.begin(), k.end(), block);
  } else {
    std::copy(key.begin(), key.end(), block);
  }
  uint8_t pad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad, kBlock);
  for (std::span<const uint8_t> p : parts) inner.update(p.data(), p.size());
  Digest inner_digest = inner.finish();
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x5c;
  return Sha256().update(pad, kBlock).update(inner_digest.data(), inner_digest.size()).finish();
}

bool equal_constant_time(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = diff | (a[i] ^ b[i]);
  return diff == 0;
}

std::string hex(std::span<const uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}
std::string hex(const Digest& d) {
  return hex(std::span<const uint8_t>(d.data(), d.size()));
}

}  // namespace zc
