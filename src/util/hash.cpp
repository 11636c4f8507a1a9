#include "util/hash.h"

#include <openssl/evp.h>

#include "util/check.h"

namespace zc {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  ZC_CHECK(state_->ctx && EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) == 1,
           "SHA-256 init failed");
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(state_->ctx);
}

Sha256& Sha256::update(const void* data, size_t n) {
  ZC_CHECK(EVP_DigestUpdate(state_->ctx, data, n) == 1, "SHA-256 update failed");
  return *this;
}

Digest Sha256::finish() {
  Digest d;
  unsigned int len = 0;
  ZC_CHECK(EVP_DigestFinal_ex(state_->ctx, d.data(), &len) == 1 && len == d.size(),
           "SHA-256 final failed");
  return d;
}

Digest sha256(std::span<const uint8_t> bytes) {
  return Sha256().update(bytes.data(), bytes.size()).finish();
}
Digest sha256(std::string_view s) {
  return Sha256().update(s).finish();
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
