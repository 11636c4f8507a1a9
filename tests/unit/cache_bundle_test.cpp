#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cache/bundle.h"
#include "unit/test_support.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "zc/version.h"

namespace {

using zc::test::contains;
using zc::test::error_message;

namespace fs = std::filesystem;
using namespace zc::cache;

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

const std::string kKeyA = "key A: shared by CI writers and fleet readers";
const std::string kKeyB = "key B: some other key";

Provenance here() {
  return {zc::build_id(), "x86-64-v3", "g++ 13.3 /usr/bin/c++ 1234@5678"};
}

// Payloads shaped like real ones: some structure (compressible), some noise.
Entry make_test_entry(Level level, int seed, size_t payload_size) {
  Entry e;
  e.level = level;
  e.key = zc::sha256("test key " + std::to_string(seed));
  e.compile_ms = 12.5 + seed;
  e.created_unix = 1'700'000'000 + seed;
  std::mt19937 rng(seed);
  e.payload.resize(payload_size);
  for (size_t i = 0; i < payload_size; ++i) {
    e.payload[i] = (i % 4 == 0) ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(i / 64);
  }
  return e;
}

// One item per level and a few more, with and without a binary (empty toolchain), including
// an empty payload and one big enough to span several zstd blocks.
std::vector<BundleItem> sample_items() {
  const Provenance p = here();
  const Provenance no_binary{p.build_id, p.target, ""};
  std::vector<BundleItem> items;
  items.push_back({make_test_entry(Level::graph, 1, 3000), p});
  items.push_back({make_test_entry(Level::lowering, 2, 500), no_binary});
  items.push_back({make_test_entry(Level::kernel, 3, 20000), p});
  items.push_back({make_test_entry(Level::autotune, 4, 64), no_binary});
  items.push_back({make_test_entry(Level::kernel, 5, 0), p});
  items.push_back({make_test_entry(Level::graph, 6, 300000), p});
  return items;
}

// Small enough to damage at every byte position quickly.
std::vector<BundleItem> small_items() {
  const Provenance p = here();
  std::vector<BundleItem> items;
  items.push_back({make_test_entry(Level::graph, 11, 200), p});
  items.push_back({make_test_entry(Level::kernel, 12, 300), p});
  items.push_back({make_test_entry(Level::autotune, 13, 40), {p.build_id, p.target, ""}});
  items.push_back({make_test_entry(Level::lowering, 14, 150), p});
  return items;
}

bool same_entry(const Entry& a, const Entry& b) {
  return a.level == b.level && a.key == b.key && a.compile_ms == b.compile_ms &&
         a.created_unix == b.created_unix && a.payload == b.payload;
}

bool same_provenance(const Provenance& a, const Provenance& b) {
  return a.build_id == b.build_id && a.target == b.target && a.toolchain == b.toolchain;
}

void expect_all_ok(const BundleContents& c, const std::vector<BundleItem>& items) {
  ASSERT_EQ(c.items.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const ReadItem& r = c.items[i];
    SCOPED_TRACE("item " + std::to_string(i));
    EXPECT_EQ(r.status, ItemStatus::ok) << r.reason;
    ASSERT_TRUE(r.entry.has_value());
    EXPECT_TRUE(same_entry(*r.entry, items[i].entry));
    EXPECT_EQ(r.level, items[i].entry.level);
    EXPECT_EQ(r.key_hex, zc::hex(items[i].entry.key));
    EXPECT_TRUE(same_provenance(r.provenance, items[i].provenance));
  }
}

// Whatever damage was done, an item reported ok must be exactly the entry written.
void expect_ok_items_intact(const BundleContents& c, const std::vector<BundleItem>& items) {
  ASSERT_EQ(c.items.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (c.items[i].status != ItemStatus::ok) {
      EXPECT_FALSE(c.items[i].entry.has_value());
      continue;
    }
    ASSERT_TRUE(c.items[i].entry.has_value());
    EXPECT_TRUE(same_entry(*c.items[i].entry, items[i].entry)) << "item " << i;
  }
}

// A bundle built by hand, for manifests no honest writer produces. Mirrors the layout in
// bundle.h: magic, version, manifest length, manifest, manifest SHA-256, data.
struct CraftedRecord {
  Level level = Level::kernel;
  zc::Digest key{};
  uint64_t size = 0, compressed_size = 0;
  zc::Digest checksum{};
};

std::vector<uint8_t> craft_bundle(const std::vector<CraftedRecord>& records,
                                  const std::vector<uint8_t>& data, uint64_t count_override = 0,
                                  uint32_t format = 1) {
  const Provenance p = here();
  zc::ByteWriter m;
  m.str(zc::version());
  m.str(zc::build_id());
  m.u8(0);
  m.u64(count_override ? count_override : records.size());
  for (const CraftedRecord& r : records) {
    m.u8(static_cast<uint8_t>(r.level));
    m.raw(r.key.data(), r.key.size());
    m.str(p.build_id);
    m.str(p.target);
    m.str(p.toolchain);
    m.u64(r.size);
    m.u64(r.compressed_size);
    m.raw(r.checksum.data(), r.checksum.size());
  }
  const zc::Digest sum = zc::sha256(m.bytes());
  zc::ByteWriter w;
  w.raw("ZCBUNDLE", 8);
  w.u32(format);
  w.u64(m.bytes().size());
  w.raw(m.bytes().data(), m.bytes().size());
  w.raw(sum.data(), sum.size());
  w.raw(data.data(), data.size());
  return w.take();
}

// zstd frames built by hand (raw blocks), so the tests need no zstd of their own.
std::vector<uint8_t> frame_header(uint64_t content_size) {
  std::vector<uint8_t> f = {0x28, 0xB5, 0x2F, 0xFD};  // magic
  f.push_back(0xE0);  // 8-byte content size, single segment, no checksum
  for (int i = 0; i < 8; ++i) f.push_back(static_cast<uint8_t>(content_size >> (8 * i)));
  return f;
}

void raw_block(std::vector<uint8_t>& f, const uint8_t* p, size_t n, bool last) {
  const uint32_t h = (last ? 1u : 0u) | static_cast<uint32_t>(n << 3);  // type 0: raw
  f.insert(f.end(),
           {static_cast<uint8_t>(h), static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h >> 16)});
  f.insert(f.end(), p, p + n);
}

std::vector<uint8_t> zstd(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> f = frame_header(in.size());
  constexpr size_t kBlock = 128 * 1024;
  size_t at = 0;
  do {
    const size_t n = std::min(kBlock, in.size() - at);
    raw_block(f, in.data() + at, n, at + n == in.size());
    at += n;
  } while (at < in.size());
  return f;
}

// A zstd frame whose header claims `claimed` bytes of content but holds one byte.
std::vector<uint8_t> lying_frame(uint64_t claimed) {
  std::vector<uint8_t> f = frame_header(claimed);
  const uint8_t x = 'x';
  raw_block(f, &x, 1, true);
  return f;
}

// AddressSanitizer writes shadow memory for every large allocation, so resident size says
// nothing about what the code itself touched there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::path(ZC_TEST_TMPDIR) / "cache_bundle";
  fs::create_directories(dir);
  return (dir / name).string();
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(CacheBundle, RoundTripUnsigned) {
  const auto items = sample_items();
  const auto bytes = write_bundle(items);
  const BundleContents c = read_bundle(bytes, here());
  EXPECT_EQ(c.writer_version, zc::version());
  EXPECT_EQ(c.writer_build_id, zc::build_id());
  EXPECT_FALSE(c.signed_bundle);
  EXPECT_FALSE(c.signature_verified);
  expect_all_ok(c, items);
}

TEST(CacheBundle, RoundTripSigned) {
  const auto items = sample_items();
  const auto bytes = write_bundle(items, as_bytes(kKeyA));
  const BundleContents c = read_bundle(bytes, here(), as_bytes(kKeyA));
  EXPECT_TRUE(c.signed_bundle);
  EXPECT_TRUE(c.signature_verified);
  expect_all_ok(c, items);
}

TEST(CacheBundle, RoundTripEmpty) {
  const auto bytes = write_bundle({});
  EXPECT_TRUE(read_bundle(bytes, here()).items.empty());
  const auto signed_bytes = write_bundle({}, as_bytes(kKeyA));
  const BundleContents c = read_bundle(signed_bytes, here(), as_bytes(kKeyA));
  EXPECT_TRUE(c.signature_verified);
  EXPECT_TRUE(c.items.empty());
}

TEST(CacheBundle, CompressesPayloads) {
  const auto items = sample_items();
  size_t raw = 0;
  for (const auto& it : items) raw += encode_entry(it.entry).size();
  EXPECT_LT(write_bundle(items).size(), raw);
}

TEST(CacheBundle, RefusesOtherBuildTargetToolchain) {
  const Provenance p = here();
  std::vector<BundleItem> items = {
      {make_test_entry(Level::graph, 1, 100), {"0123abcd-other-build", p.target, p.toolchain}},
      {make_test_entry(Level::kernel, 2, 100), {p.build_id, "x86-64-v4", p.toolchain}},
      {make_test_entry(Level::kernel, 3, 100), {p.build_id, p.target, "clang 18 /usr/bin/clang"}},
      {make_test_entry(Level::lowering, 4, 100), {p.build_id, p.target, ""}},
      {make_test_entry(Level::graph, 5, 100), p},
  };
  const BundleContents c = read_bundle(write_bundle(items), p);
  ASSERT_EQ(c.items.size(), 5u);

  EXPECT_EQ(c.items[0].status, ItemStatus::wrong_build);
  EXPECT_TRUE(contains(c.items[0].reason, "0123abcd-other-build")) << c.items[0].reason;
  EXPECT_TRUE(contains(c.items[0].reason, p.build_id)) << c.items[0].reason;

  EXPECT_EQ(c.items[1].status, ItemStatus::wrong_target);
  EXPECT_TRUE(contains(c.items[1].reason, "x86-64-v4")) << c.items[1].reason;
  EXPECT_TRUE(contains(c.items[1].reason, "x86-64-v3")) << c.items[1].reason;

  EXPECT_EQ(c.items[2].status, ItemStatus::wrong_toolchain);
  EXPECT_TRUE(contains(c.items[2].reason, "clang 18 /usr/bin/clang")) << c.items[2].reason;
  EXPECT_TRUE(contains(c.items[2].reason, p.toolchain)) << c.items[2].reason;

  // No binary, so no toolchain to disagree with.
  EXPECT_EQ(c.items[3].status, ItemStatus::ok) << c.items[3].reason;
  EXPECT_EQ(c.items[4].status, ItemStatus::ok) << c.items[4].reason;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(c.items[i].entry.has_value());
  EXPECT_EQ(std::string(item_status_name(c.items[0].status)), "wrong_build");
}

TEST(CacheBundle, ReaderWithoutToolchainAcceptsBinariesForItsBuildAndTarget) {
  const auto items = sample_items();
  Provenance no_compiler = here();
  no_compiler.toolchain.clear();
  expect_all_ok(read_bundle(write_bundle(items), no_compiler), items);
}

TEST(CacheBundle, ProvenanceRefusalNamesTheItem) {
  const auto items = sample_items();
  Provenance other = here();
  other.build_id = "another-build";
  const BundleContents c = read_bundle(write_bundle(items), other);
  ASSERT_EQ(c.items.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(c.items[i].status, ItemStatus::wrong_build);
    EXPECT_EQ(c.items[i].key_hex, zc::hex(items[i].entry.key));
    EXPECT_EQ(c.items[i].level, items[i].entry.level);
  }
}

TEST(CacheBundle, WrongKeyRefusesEveryItem) {
  const auto items = sample_items();
  const BundleContents c =
      read_bundle(write_bundle(items, as_bytes(kKeyA)), here(), as_bytes(kKeyB));
  EXPECT_TRUE(c.signed_bundle);
  EXPECT_FALSE(c.signature_verified);
  ASSERT_EQ(c.items.size(), items.size());
  for (const ReadItem& r : c.items) {
    EXPECT_EQ(r.status, ItemStatus::bad_signature);
    EXPECT_FALSE(r.entry.has_value());
    EXPECT_TRUE(contains(r.reason, "signature")) << r.reason;
  }
}

TEST(CacheBundle, UnsignedBundleRefusedWhenKeyConfigured) {
  const auto items = sample_items();
  const BundleContents c = read_bundle(write_bundle(items), here(), as_bytes(kKeyA));
  EXPECT_FALSE(c.signed_bundle);
  ASSERT_EQ(c.items.size(), items.size());
  for (const ReadItem& r : c.items) {
    EXPECT_EQ(r.status, ItemStatus::unsigned_required);
    EXPECT_FALSE(r.entry.has_value());
  }
}

// Without a key there is nothing to verify against: the signature is not checked, every
// entry's checksum still is, and the caller can tell from signature_verified.
TEST(CacheBundle, SignedBundleReadWithoutKeyIsUnverified) {
  const auto items = sample_items();
  auto bytes = write_bundle(items, as_bytes(kKeyA));
  BundleContents c = read_bundle(bytes, here());
  EXPECT_TRUE(c.signed_bundle);
  EXPECT_FALSE(c.signature_verified);
  expect_all_ok(c, items);

  bytes.back() ^= 0x01;  // a broken signature is not noticed without the key
  expect_all_ok(read_bundle(bytes, here()), items);
  for (const ReadItem& r : read_bundle(bytes, here(), as_bytes(kKeyA)).items) {
    EXPECT_EQ(r.status, ItemStatus::bad_signature);
  }
}

TEST(CacheBundle, StrippedSignatureIsNoticed) {
  const auto items = small_items();
  auto bytes = write_bundle(items, as_bytes(kKeyA));
  bytes.resize(bytes.size() - 32);
  for (const ReadItem& r : read_bundle(bytes, here(), as_bytes(kKeyA)).items) {
    EXPECT_EQ(r.status, ItemStatus::bad_signature);
  }
  // The manifest still says signed, so the last 32 bytes are taken as the signature and the
  // last entry is short.
  const BundleContents c = read_bundle(bytes, here());
  expect_ok_items_intact(c, items);
  EXPECT_EQ(c.items.back().status, ItemStatus::bad_checksum);
}

TEST(CacheBundle, EveryTruncationIsReportedNeverACrash) {
  auto items = sample_items();
  items.pop_back();  // keeps the number of cuts small; the rest still spans several blocks
  const auto bytes = write_bundle(items);
  size_t prev_ok = 0, errors = 0, reads = 0;
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
    BundleContents c;
    try {
      c = read_bundle(std::span(bytes).first(cut), here());
    } catch (const zc::Error&) {
      ++errors;
      EXPECT_EQ(prev_ok, 0u) << "the manifest came back after it was readable";
      continue;
    }
    ++reads;
    expect_ok_items_intact(c, items);
    // Entries are stored in order: those wholly before the cut load, the rest are truncated.
    size_t ok = 0;
    while (ok < c.items.size() && c.items[ok].status == ItemStatus::ok) ++ok;
    for (size_t i = ok; i < c.items.size(); ++i) {
      EXPECT_EQ(c.items[i].status, ItemStatus::bad_checksum);
      EXPECT_TRUE(contains(c.items[i].reason, "truncated")) << c.items[i].reason;
    }
    EXPECT_GE(ok, prev_ok);
    prev_ok = ok;
  }
  EXPECT_GT(errors, 0u);
  EXPECT_GT(reads, 0u);
  // Cut one byte short: only the last entry is lost.
  const BundleContents c = read_bundle(std::span(bytes).first(bytes.size() - 1), here());
  size_t ok = 0;
  for (const ReadItem& r : c.items) ok += r.status == ItemStatus::ok;
  EXPECT_EQ(ok, items.size() - 1);
  EXPECT_EQ(c.items.back().status, ItemStatus::bad_checksum);
}

TEST(CacheBundle, TruncatedSignedBundleRefusedWithKey) {
  const auto items = small_items();
  const auto bytes = write_bundle(items, as_bytes(kKeyA));
  for (size_t cut = 0; cut < bytes.size(); cut += 5) {
    try {
      const BundleContents c = read_bundle(std::span(bytes).first(cut), here(), as_bytes(kKeyA));
      for (const ReadItem& r : c.items) EXPECT_EQ(r.status, ItemStatus::bad_signature);
    } catch (const zc::Error&) {
    }
  }
}

TEST(CacheBundle, FlippedByteNeverYieldsWrongContents) {
  const auto items = small_items();
  const auto clean = write_bundle(items);
  size_t detected = 0;
  for (size_t pos = 0; pos < clean.size(); ++pos) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
      auto bytes = clean;
      bytes[pos] ^= mask;
      SCOPED_TRACE("byte " + std::to_string(pos) + " ^ " + std::to_string(mask));
      try {
        const BundleContents c = read_bundle(bytes, here());
        expect_ok_items_intact(c, items);
        for (const ReadItem& r : c.items) {
          // The manifest is checksummed, so damage can never pass for another provenance.
          EXPECT_TRUE(r.status == ItemStatus::ok || r.status == ItemStatus::bad_checksum)
              << item_status_name(r.status);
          detected += r.status != ItemStatus::ok;
        }
      } catch (const zc::Error&) {
        ++detected;
      }
    }
  }
  EXPECT_GT(detected, clean.size());
}

TEST(CacheBundle, FlippedByteInSignedBundleRefusesEverything) {
  const auto items = small_items();
  const auto clean = write_bundle(items, as_bytes(kKeyA));
  for (size_t pos = 0; pos < clean.size(); pos += 3) {
    auto bytes = clean;
    bytes[pos] ^= 0x04;
    SCOPED_TRACE("byte " + std::to_string(pos));
    try {
      const BundleContents c = read_bundle(bytes, here(), as_bytes(kKeyA));
      EXPECT_FALSE(c.signature_verified);
      for (const ReadItem& r : c.items) {
        EXPECT_TRUE(r.status == ItemStatus::bad_signature ||
                    r.status == ItemStatus::unsigned_required)
            << item_status_name(r.status);
      }
    } catch (const zc::Error&) {
    }
  }
}

TEST(CacheBundle, NotABundleIsAnError) {
  EXPECT_TRUE(contains(error_message([] { read_bundle({}, here()); }), "not a zc cache bundle"));
  const auto entry = encode_entry(make_test_entry(Level::graph, 1, 100));
  EXPECT_TRUE(
      contains(error_message([&] { read_bundle(entry, here()); }), "not a zc cache bundle"));
  std::mt19937 rng(7);
  for (size_t n : {1, 8, 19, 20, 52, 100, 1000, 65536}) {
    std::vector<uint8_t> junk(n);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    EXPECT_THROW(read_bundle(junk, here()), zc::Error) << n << " random bytes";
    if (n >= 8) {
      std::memcpy(junk.data(), "ZCBUNDLE", 8);
      EXPECT_THROW(read_bundle(junk, here()), zc::Error) << n << " bytes after the magic";
      EXPECT_THROW(read_bundle(junk, here(), as_bytes(kKeyA)), zc::Error);
    }
  }
}

TEST(CacheBundle, NewerFormatIsNamed) {
  const auto bytes = craft_bundle({}, {}, 0, 9);
  const std::string msg = error_message([&] { read_bundle(bytes, here()); });
  EXPECT_TRUE(contains(msg, "version 9")) << msg;
  EXPECT_TRUE(contains(msg, "newer")) << msg;
}

TEST(CacheBundle, CraftedBundleMatchesTheWriter) {
  // Keeps craft_bundle honest, so the tests below exercise the real format.
  const Entry e = make_test_entry(Level::kernel, 21, 1000);
  const auto enc = encode_entry(e);
  const auto frame = zstd(enc);
  const auto bytes =
      craft_bundle({{Level::kernel, e.key, enc.size(), frame.size(), zc::sha256(enc)}}, frame);
  expect_all_ok(read_bundle(bytes, here()), {{e, here()}});
}

TEST(CacheBundle, HugeClaimedSizesAllocateNothing) {
  const Entry e = make_test_entry(Level::kernel, 22, 1000);
  const auto enc = encode_entry(e);
  const auto frame = zstd(enc);
  const auto lie = lying_frame((uint64_t{1} << 30) - 1);
  const auto lie_over = lying_frame(uint64_t{1} << 40);
  std::vector<uint8_t> data;
  for (const auto* f : {&frame, &lie, &lie_over, &frame})
    data.insert(data.end(), f->begin(), f->end());
  const std::vector<CraftedRecord> records = {
      // Claims far more than the frame holds.
      {Level::kernel, e.key, uint64_t{1} << 62, frame.size(), zc::sha256(enc)},
      // The frame header agrees with the manifest, under the limit, but the data is one byte.
      {Level::kernel, e.key, (uint64_t{1} << 30) - 1, lie.size(), zc::sha256(enc)},
      // Both agree, over the limit.
      {Level::kernel, e.key, uint64_t{1} << 40, lie_over.size(), zc::sha256(enc)},
      // Honest: still loads after its neighbours were refused.
      {Level::kernel, e.key, enc.size(), frame.size(), zc::sha256(enc)},
  };
  const long rss_before = max_rss_kib();
  const BundleContents c = read_bundle(craft_bundle(records, data), here());
  if (!kAsan) {
    EXPECT_LT(max_rss_kib() - rss_before, 64 * 1024) << "KiB touched";
  }
  ASSERT_EQ(c.items.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.items[i].status, ItemStatus::bad_checksum) << i;
    EXPECT_FALSE(c.items[i].reason.empty());
  }
  EXPECT_TRUE(contains(c.items[0].reason, "limit")) << c.items[0].reason;
  EXPECT_TRUE(contains(c.items[2].reason, "limit")) << c.items[2].reason;
  EXPECT_EQ(c.items[3].status, ItemStatus::ok) << c.items[3].reason;
}

TEST(CacheBundle, HugeCountsAndOffsetsAreBounded) {
  const std::string msg =
      error_message([] { read_bundle(craft_bundle({}, {}, uint64_t{1} << 60), here()); });
  EXPECT_TRUE(contains(msg, "claims")) << msg;

  const Entry e = make_test_entry(Level::kernel, 23, 100);
  const auto enc = encode_entry(e);
  const auto frame = zstd(enc);
  // A compressed size that would wrap the offset must not bring the next item back in range.
  const std::vector<CraftedRecord> records = {
      {Level::kernel, e.key, enc.size(), ~uint64_t{0}, zc::sha256(enc)},
      {Level::kernel, e.key, enc.size(), frame.size(), zc::sha256(enc)},
  };
  const BundleContents c = read_bundle(craft_bundle(records, frame), here());
  ASSERT_EQ(c.items.size(), 2u);
  for (const ReadItem& r : c.items) {
    EXPECT_EQ(r.status, ItemStatus::bad_checksum);
    EXPECT_TRUE(contains(r.reason, "truncated")) << r.reason;
  }
}

TEST(CacheBundle, ManifestMustAgreeWithTheEntry) {
  const Entry e = make_test_entry(Level::kernel, 24, 100);
  const auto enc = encode_entry(e);
  const auto frame = zstd(enc);
  const zc::Digest other_key = zc::sha256(std::string_view("another key"));
  const std::vector<CraftedRecord> records = {
      {Level::graph, e.key, enc.size(), frame.size(), zc::sha256(enc)},       // wrong level
      {Level::kernel, other_key, enc.size(), frame.size(), zc::sha256(enc)},  // wrong key
      {Level::kernel, e.key, enc.size(), frame.size(), other_key},            // wrong checksum
  };
  std::vector<uint8_t> data;
  for (int i = 0; i < 3; ++i) data.insert(data.end(), frame.begin(), frame.end());
  const BundleContents c = read_bundle(craft_bundle(records, data), here());
  ASSERT_EQ(c.items.size(), 3u);
  for (const ReadItem& r : c.items) EXPECT_EQ(r.status, ItemStatus::bad_checksum) << r.reason;
  EXPECT_TRUE(contains(c.items[0].reason, "level")) << c.items[0].reason;
  EXPECT_TRUE(contains(c.items[1].reason, "key")) << c.items[1].reason;
  EXPECT_TRUE(contains(c.items[2].reason, "checksum")) << c.items[2].reason;
}

TEST(CacheBundle, ReadsHmacKeyFile) {
  const std::string path = temp_path("key");
  write_file(path, "s3cret\n");
  EXPECT_EQ(read_hmac_key_file(path), std::vector<uint8_t>({'s', '3', 'c', 'r', 'e', 't'}));
  write_file(path, "s3cret\r\n");
  EXPECT_EQ(read_hmac_key_file(path).size(), 6u);
  write_file(path, std::string("\x00\xff\n\n", 4));  // binary keys kept; one newline dropped
  EXPECT_EQ(read_hmac_key_file(path), std::vector<uint8_t>({0x00, 0xff, '\n'}));

  const auto items = small_items();
  write_file(path, kKeyA + "\n");
  const auto key = read_hmac_key_file(path);
  EXPECT_TRUE(read_bundle(write_bundle(items, key), here(), as_bytes(kKeyA)).signature_verified);
}

TEST(CacheBundle, HmacKeyFileErrorsNameThePath) {
  const std::string missing = temp_path("no-such-key");
  fs::remove(missing);
  std::string msg = error_message([&] { read_hmac_key_file(missing); });
  EXPECT_TRUE(contains(msg, missing)) << msg;

  const std::string empty = temp_path("empty-key");
  for (const char* content : {"", "\n"}) {
    write_file(empty, content);
    msg = error_message([&] { read_hmac_key_file(empty); });
    EXPECT_TRUE(contains(msg, empty)) << msg;
    EXPECT_TRUE(contains(msg, "empty")) << msg;
  }

  const std::string dir = temp_path("key-dir");
  fs::create_directories(dir);
  msg = error_message([&] { read_hmac_key_file(dir); });
  EXPECT_TRUE(contains(msg, dir)) << msg;
}

}  // namespace
