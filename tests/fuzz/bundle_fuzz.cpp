// Fuzzes the cache bundle reader: arbitrary bytes must be refused (zc::Error) or reported item
// by item, never a crash, an unbounded allocation or undefined behaviour, and an item reported
// ok must be a verified entry of the level and key the manifest names.
//
// The manifest is protected by its own SHA-256 and a signed bundle by an HMAC, which mutation
// alone almost never gets past. So besides the raw input, each input is also read with those
// two fixed up: that reaches the manifest decoder and the paths after a verified signature.
// Seeds (written by seed_corpus) use the provenance and key below.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "cache/bundle.h"
#include "cache/entry.h"
#include "util/hash.h"
#include "zc/error.h"

namespace {

using namespace zc::cache;

const Provenance kExpect{"fuzz-build", "fuzz-target", "fuzz-toolchain"};
const std::string kKey = "zc-fuzz-key";

// Where the manifest and its checksum sit: magic, u32 version, u64 manifest length.
constexpr size_t kPreamble = 8 + 4 + 8;
constexpr size_t kDigest = 32;

std::span<const uint8_t> key_bytes() {
  return {reinterpret_cast<const uint8_t*>(kKey.data()), kKey.size()};
}

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bundle_fuzz: %s\n", what);
    std::abort();
  }
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

void check_contents(const BundleContents& c, bool with_key) {
  require(with_key || !c.signature_verified, "verified a signature without a key");
  require(!c.signature_verified || c.signed_bundle, "verified an unsigned bundle");
  for (const ReadItem& r : c.items) {
    require((r.status == ItemStatus::ok) == r.entry.has_value(), "entry set iff ok");
    require(r.status == ItemStatus::ok || !r.reason.empty(), "refused without a reason");
    require(!with_key || r.status != ItemStatus::ok || c.signature_verified,
            "ok item from an unverified bundle while a key is configured");
    if (!r.entry) continue;
    const Entry& e = *r.entry;
    require(e.level == r.level && zc::hex(e.key) == r.key_hex, "entry differs from manifest");
    require(r.provenance.build_id == kExpect.build_id && r.provenance.target == kExpect.target,
            "ok item made for another build or target");
    require(r.provenance.toolchain.empty() || r.provenance.toolchain == kExpect.toolchain,
            "ok item made with another toolchain");
    // A verified entry re-encodes to bytes that decode to the same entry.
    std::string why;
    auto again = decode_entry(encode_entry(e), e.level, &e.key, &why);
    require(again && again->payload == e.payload && same_bits(again->compile_ms, e.compile_ms) &&
                again->created_unix == e.created_unix,
            "ok entry does not round-trip");
  }
}

void read(std::span<const uint8_t> bytes, bool with_key) {
  try {
    check_contents(read_bundle(bytes, kExpect, with_key ? key_bytes() : std::span<const uint8_t>{}),
                   with_key);
  } catch (const zc::Error&) {
  }
}

// The input with a correct manifest checksum, when its manifest length fits; empty otherwise.
std::vector<uint8_t> with_manifest_checksum(std::span<const uint8_t> in) {
  if (in.size() < kPreamble + kDigest) return {};
  uint64_t manifest_size = 0;
  std::memcpy(&manifest_size, in.data() + 12, 8);
  if (manifest_size > in.size() - kPreamble - kDigest) return {};
  std::vector<uint8_t> out(in.begin(), in.end());
  const zc::Digest sum = zc::sha256(std::span(out).subspan(kPreamble, manifest_size));
  std::memcpy(out.data() + kPreamble + manifest_size, sum.data(), kDigest);
  return out;
}

void sign_in_place(std::vector<uint8_t>& bytes) {
  if (bytes.size() < kDigest) return;
  unsigned int len = 0;
  uint8_t mac[EVP_MAX_MD_SIZE];
  HMAC(EVP_sha256(), kKey.data(), static_cast<int>(kKey.size()), bytes.data(),
       bytes.size() - kDigest, mac, &len);
  std::memcpy(bytes.data() + bytes.size() - kDigest, mac, kDigest);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  read(in, false);
  read(in, true);
  std::vector<uint8_t> fixed = with_manifest_checksum(in);
  if (!fixed.empty()) {
    read(fixed, false);
    sign_in_place(fixed);
    read(fixed, true);
  }
  return 0;
}
