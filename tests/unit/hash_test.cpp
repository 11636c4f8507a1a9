// SHA-256 and HMAC-SHA256 against published test vectors (FIPS 180-2 examples, RFC 4231), so
// a change of the implementation underneath cache keys and signatures cannot go unnoticed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/hash.h"

namespace zc {
namespace {

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(hex(sha256(std::string_view{})),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256(std::string_view{"abc"})),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      hex(sha256(std::string_view{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"})),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1'000'000, 'a');
  EXPECT_EQ(hex(sha256(million)),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string text(1000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7);
  Sha256 h;
  for (size_t at = 0; at < text.size(); at += 37) h.update(std::string_view(text).substr(at, 37));
  EXPECT_EQ(h.finish(), sha256(text));
}

TEST(HmacSha256, Rfc4231Vectors) {
  // Test case 1: a 20-byte key.
  std::vector<uint8_t> key1(20, 0x0b);
  EXPECT_EQ(hex(hmac_sha256(key1, bytes("Hi There"))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: a key shorter than the digest.
  EXPECT_EQ(hex(hmac_sha256(bytes("Jefe"), bytes("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block, hashed first.
  std::vector<uint8_t> key6(131, 0xaa);
  EXPECT_EQ(hex(hmac_sha256(key6, bytes("Test Using Larger Than Block-Size Key - Hash Key First"))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, PartsAreConcatenated) {
  std::vector<uint8_t> key(32, 0x42);
  EXPECT_EQ(hmac_sha256(key, {bytes("zc:v1:"), bytes("graph"), bytes("")}),
            hmac_sha256(key, bytes("zc:v1:graph")));
  EXPECT_NE(hmac_sha256(key, bytes("zc:v1:graph")), hmac_sha256(key, bytes("zc:v1:graph ")));
}

TEST(EqualConstantTime, ComparesContentAndLength) {
  EXPECT_TRUE(equal_constant_time(bytes("abc"), bytes("abc")));
  EXPECT_FALSE(equal_constant_time(bytes("abc"), bytes("abd")));
  EXPECT_FALSE(equal_constant_time(bytes("abc"), bytes("ab")));
  EXPECT_TRUE(equal_constant_time(bytes(""), bytes("")));
}

}  // namespace
}  // namespace zc
