#include "cache/bundle.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string_view>

#include "util/bytes.h"
#include "util/check.h"
#include "zc/error.h"
#include "zc/version.h"

namespace zc::cache {

namespace {

constexpr std::array<uint8_t, 8> kMagic = {'Z', 'C', 'B', 'U', 'N', 'D', 'L', 'E'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint8_t kFlagSigned = 1;
constexpr size_t kDigestSize = 32;
constexpr size_t kMacSize = 32;
// Magic, format version and manifest length.
constexpr size_t kPreambleSize = kMagic.size() + 4 + 8;
// The smallest manifest record (empty provenance strings): bounds the entry count a manifest
// may claim before anything is allocated for it.
constexpr uint64_t kMinRecordSize = 1 + kDigestSize + 3 * 8 + 8 + 8 + kDigestSize;
// No real entry comes near this; it bounds what a crafted size can make a reader allocate.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;
// Level 3: zstd's default, several hundred MB/s, so import stays far below a compile's cost.
constexpr int kZstdLevel = 3;
constexpr size_t kMaxKeyFileBytes = size_t{1} << 20;

struct Record {
  Level level = Level::graph;
  Digest key{};
  Provenance provenance;
  uint64_t size = 0;
  uint64_t compressed_size = 0;
  Digest checksum{};
};

struct Manifest {
  std::string writer_version, writer_build_id;
  bool signed_bundle = false;
  std::vector<Record> records;
};

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

bool known_level(uint8_t v) {
  for (Level l : kLevels) {
    if (static_cast<uint8_t>(l) == v) return true;
  }
  return false;
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

std::vector<uint8_t> encode_manifest(const Manifest& m) {
  ByteWriter w;
  w.str(m.writer_version);
  w.str(m.writer_build_id);
  w.u8(m.signed_bundle ? kFlagSigned : 0);
  w.u64(m.records.size());
  for (const Record& r : m.records) {
    w.u8(static_cast<uint8_t>(r.level));
    w.raw(r.key.data(), r.key.size());
    w.str(r.provenance.build_id);
    w.str(r.provenance.target);
    w.str(r.provenance.toolchain);
    w.u64(r.size);
    w.u64(r.compressed_size);
    w.raw(r.checksum.data(), r.checksum.size());
  }
  return w.take();
}

// The manifest's own checksum has been verified by the caller, so anything odd here comes
// from a writer we do not understand rather than from corruption: no item can be trusted.
Manifest decode_manifest(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "cache bundle manifest");
  Manifest m;
  m.writer_version = r.str();
  m.writer_build_id = r.str();
  const uint8_t flags = r.u8();
  if (flags & ~kFlagSigned) {
    throw Error("cache bundle manifest has unknown flags " + std::to_string(flags) +
                " (written by a newer zc " + m.writer_version + "?); upgrade zc to read it");
  }
  m.signed_bundle = flags & kFlagSigned;
  const uint64_t count = r.u64();
  if (count > r.remaining() / kMinRecordSize) {
    throw Error("cache bundle manifest claims " + std::to_string(count) +
                " entries but holds only " + std::to_string(r.remaining()) + " bytes");
  }
  m.records.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    Record rec;
    const uint8_t level = r.u8();
    if (!known_level(level)) {
      throw Error("cache bundle manifest entry " + std::to_string(i) + " has unknown level " +
                  std::to_string(level) + "; upgrade zc to read it");
    }
    rec.level = static_cast<Level>(level);
    auto key = r.raw(kDigestSize);
    std::memcpy(rec.key.data(), key.data(), kDigestSize);
    rec.provenance.build_id = r.str();
    rec.provenance.target = r.str();
    rec.provenance.toolchain = r.str();
    rec.size = r.u64();
    rec.compressed_size = r.u64();
    auto sum = r.raw(kDigestSize);
    std::memcpy(rec.checksum.data(), sum.data(), kDigestSize);
    m.records.push_back(std::move(rec));
  }
  if (r.remaining() != 0) {
    throw Error("cache bundle manifest has " + std::to_string(r.remaining()) +
                " unexpected trailing bytes");
  }
  return m;
}

// Decompresses and verifies one entry. The allocation is bounded by the manifest's size,
// which must agree with the frame header and stay under kMaxEntryBytes, and the buffer is
// left uninitialized so a crafted claim that fails later costs no page faults.
std::optional<Entry> load_entry(ZSTD_DCtx* dctx, const Record& rec, std::span<const uint8_t> frame,
                                std::string* why) {
  if (rec.size > kMaxEntryBytes) {
    *why = "entry claims " + std::to_string(rec.size) + " bytes, over the " +
           std::to_string(kMaxEntryBytes) + "-byte limit";
    return std::nullopt;
  }
  const unsigned long long framed = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (framed == ZSTD_CONTENTSIZE_ERROR || framed == ZSTD_CONTENTSIZE_UNKNOWN) {
    *why = "compressed data is not a zstd frame with a known size";
    return std::nullopt;
  }
  if (framed != rec.size) {
    *why = "compressed data holds " + std::to_string(framed) + " bytes, manifest says " +
           std::to_string(rec.size);
    return std::nullopt;
  }
  const size_t frame_len = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(frame_len) || frame_len != frame.size()) {
    *why = "compressed data is not exactly one zstd frame";
    return std::nullopt;
  }
  std::unique_ptr<uint8_t[]> buf;
  try {
    buf.reset(new uint8_t[rec.size > 0 ? rec.size : 1]);
  } catch (const std::bad_alloc&) {
    *why = "cannot allocate " + std::to_string(rec.size) + " bytes to decompress the entry";
    return std::nullopt;
  }
  const size_t got = ZSTD_decompressDCtx(dctx, buf.get(), rec.size, frame.data(), frame.size());
  if (ZSTD_isError(got)) {
    *why = std::string("decompression failed: ") + ZSTD_getErrorName(got);
    return std::nullopt;
  }
  if (got != rec.size) {
    *why =
        "decompressed " + std::to_string(got) + " bytes, manifest says " + std::to_string(rec.size);
    return std::nullopt;
  }
  std::span<const uint8_t> encoded(buf.get(), got);
  if (sha256(encoded) != rec.checksum) {
    *why = "entry checksum mismatch";
    return std::nullopt;
  }
  std::string decode_why;
  auto entry = decode_entry(encoded, rec.level, &rec.key, &decode_why);
  if (!entry) *why = "entry does not decode: " + decode_why;
  return entry;
}

// Why an item's provenance makes it unusable here, or nullopt when it matches. A field the
// entry leaves empty is one it does not depend on: a lowered graph names no target (it holds
// no machine code), a compiled kernel names no zc build (its key is the source, the compiler
// and the target). A field the entry names must match this process. The toolchain is also
// skipped when this process has none: a compiler-less deployment can still load a prebuilt
// binary whose build and target match, which is what warming it from a bundle is for. Keys
// hash these same values, so this check explains a refusal rather than being the only guard.
std::optional<std::pair<ItemStatus, std::string>> provenance_mismatch(const Provenance& got,
                                                                      const Provenance& want) {
  if (!got.build_id.empty() && got.build_id != want.build_id) {
    return std::pair{ItemStatus::wrong_build, "made by zc build " + quoted(got.build_id) +
                                                  ", this process is build " +
                                                  quoted(want.build_id)};
  }
  if (!got.target.empty() && got.target != want.target) {
    return std::pair{ItemStatus::wrong_target, "made for target " + quoted(got.target) +
                                                   ", this process targets " + quoted(want.target)};
  }
  if (!got.toolchain.empty() && !want.toolchain.empty() && got.toolchain != want.toolchain) {
    return std::pair{ItemStatus::wrong_toolchain, "made with toolchain " + quoted(got.toolchain) +
                                                      ", this process uses " +
                                                      quoted(want.toolchain)};
  }
  return std::nullopt;
}

// The mismatch of `got` against every provenance of `accept`, or nullopt when one matches. A
// refusal is explained against the accepted provenance of the same kind of target (the part
// of the target before its first brace: a CPU target against the CPU's, a GPU's against the
// GPU's), else the first.
std::optional<std::pair<ItemStatus, std::string>> provenance_refusal(
    const Provenance& got, std::span<const Provenance> accept) {
  std::optional<std::pair<ItemStatus, std::string>> first, same_kind;
  auto kind = [](const std::string& t) { return t.substr(0, t.find('{')); };
  for (const Provenance& want : accept) {
    auto bad = provenance_mismatch(got, want);
    if (!bad) return std::nullopt;
    if (!first) first = bad;
    if (!same_kind && kind(got.target) == kind(want.target)) same_kind = bad;
  }
  if (same_kind) return same_kind;
  if (first) return first;
  return std::pair{ItemStatus::wrong_target, std::string("this process builds for no target")};
}

}  // namespace

const char* item_status_name(ItemStatus s) {
  switch (s) {
    case ItemStatus::ok:
      return "ok";
    case ItemStatus::bad_checksum:
      return "bad_checksum";
    case ItemStatus::wrong_build:
      return "wrong_build";
    case ItemStatus::wrong_target:
      return "wrong_target";
    case ItemStatus::wrong_toolchain:
      return "wrong_toolchain";
    case ItemStatus::bad_signature:
      return "bad_signature";
    case ItemStatus::unsigned_required:
      return "unsigned_required";
  }
  return "unknown";
}

std::vector<uint8_t> write_bundle(const std::vector<BundleItem>& items,
                                  std::span<const uint8_t> hmac_key) {
  Manifest m;
  m.writer_version = version();
  m.writer_build_id = build_id();
  m.signed_bundle = !hmac_key.empty();
  m.records.reserve(items.size());

  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  ZC_CHECK(cctx != nullptr, "cannot create a zstd compression context");
  std::vector<uint8_t> data;
  for (const BundleItem& item : items) {
    const std::vector<uint8_t> encoded = encode_entry(item.entry);
    if (encoded.size() > kMaxEntryBytes) {
      throw Error("cache bundle: entry " + hex(item.entry.key) + " is " +
                  std::to_string(encoded.size()) + " bytes, over the " +
                  std::to_string(kMaxEntryBytes) + "-byte limit readers accept");
    }
    const size_t at = data.size();
    data.resize(at + ZSTD_compressBound(encoded.size()));
    const size_t n = ZSTD_compressCCtx(cctx.get(), data.data() + at, data.size() - at,
                                       encoded.data(), encoded.size(), kZstdLevel);
    ZC_CHECK(!ZSTD_isError(n), "zstd compression failed: " << ZSTD_getErrorName(n));
    data.resize(at + n);
    m.records.push_back(Record{.level = item.entry.level,
                               .key = item.entry.key,
                               .provenance = item.provenance,
                               .size = encoded.size(),
                               .compressed_size = n,
                               .checksum = sha256(encoded)});
  }

  const std::vector<uint8_t> manifest = encode_manifest(m);
  const Digest manifest_sum = sha256(manifest);
  ByteWriter w;
  w.raw(kMagic.data(), kMagic.size());
  w.u32(kFormatVersion);
  w.u64(manifest.size());
  w.raw(manifest.data(), manifest.size());
  w.raw(manifest_sum.data(), manifest_sum.size());
  w.raw(data.data(), data.size());
  std::vector<uint8_t> out = w.take();
  if (m.signed_bundle) {
    const Digest mac = hmac_sha256(hmac_key, out);
    out.insert(out.end(), mac.begin(), mac.end());
  }
  return out;
}

BundleContents read_bundle(std::span<const uint8_t> bytes, const Provenance& expect,
                           std::span<const uint8_t> hmac_key) {
  return read_bundle(bytes, std::span<const Provenance>(&expect, 1), hmac_key);
}

BundleContents read_bundle(std::span<const uint8_t> bytes, std::span<const Provenance> accept,
                           std::span<const uint8_t> hmac_key) {
  if (bytes.size() < kPreambleSize ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    throw Error("not a zc cache bundle (" + std::to_string(bytes.size()) +
                " bytes, no bundle magic at the start)");
  }
  ByteReader pre(bytes.subspan(kMagic.size(), kPreambleSize - kMagic.size()),
                 "cache bundle header");
  const uint32_t format = pre.u32();
  if (format != kFormatVersion) {
    throw Error(
        "cache bundle format version " + std::to_string(format) +
        (format > kFormatVersion ? " is newer than this zc reads (" : " is not supported (") +
        std::to_string(kFormatVersion) + "); export it again with this zc " + version());
  }
  const uint64_t manifest_size = pre.u64();
  const size_t after_preamble = bytes.size() - kPreambleSize;
  if (after_preamble < kDigestSize || manifest_size > after_preamble - kDigestSize) {
    throw Error("cache bundle manifest truncated: it claims " + std::to_string(manifest_size) +
                " bytes, the bundle has " + std::to_string(after_preamble) + " after its header");
  }
  const auto manifest_bytes = bytes.subspan(kPreambleSize, manifest_size);
  const auto stored_sum = bytes.subspan(kPreambleSize + manifest_size, kDigestSize);
  const Digest sum = sha256(manifest_bytes);
  if (std::memcmp(sum.data(), stored_sum.data(), kDigestSize) != 0) {
    throw Error("cache bundle manifest is corrupt (checksum mismatch)");
  }
  Manifest m = decode_manifest(manifest_bytes);

  BundleContents out;
  out.writer_version = m.writer_version;
  out.writer_build_id = m.writer_build_id;
  out.signed_bundle = m.signed_bundle;

  // Data runs to the end, less the signature when the manifest says there is one. A bundle
  // cut short leaves the signature's place to whatever data came last; those items fail
  // their range check below instead of being read from the wrong bytes.
  const size_t data_begin = kPreambleSize + manifest_size + kDigestSize;
  size_t data_end = bytes.size();
  if (m.signed_bundle)
    data_end = data_end >= data_begin + kMacSize ? data_end - kMacSize : data_begin;

  // With a key, the key holder's signature is the only thing that makes an item trustworthy,
  // so an unsigned or badly signed bundle refuses everything before any entry is decompressed.
  // Without a key there is nothing to verify against: a signed bundle is read like an
  // unsigned one, and the per-entry checksums still catch corruption.
  std::optional<std::pair<ItemStatus, std::string>> refuse_all;
  if (!hmac_key.empty()) {
    if (!m.signed_bundle) {
      refuse_all = {ItemStatus::unsigned_required,
                    "the bundle is not signed and an HMAC key is configured"};
    } else if (bytes.size() < data_begin + kMacSize) {
      refuse_all = {ItemStatus::bad_signature, "the bundle's signature is missing (truncated)"};
    } else {
      const Digest mac = hmac_sha256(hmac_key, bytes.first(bytes.size() - kMacSize));
      if (!equal_constant_time(mac, bytes.last(kMacSize))) {
        refuse_all = {ItemStatus::bad_signature,
                      "the bundle's signature does not verify with the configured HMAC key"};
      } else {
        out.signature_verified = true;
      }
    }
  }

  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  ZC_CHECK(dctx != nullptr, "cannot create a zstd decompression context");
  // Saturates instead of wrapping, so a crafted size cannot bring a later item's offset back
  // into range.
  uint64_t offset = data_begin;
  out.items.reserve(m.records.size());
  for (Record& rec : m.records) {
    ReadItem item;
    item.level = rec.level;
    item.key_hex = hex(rec.key);
    item.provenance = std::move(rec.provenance);
    const uint64_t begin = offset;
    offset = rec.compressed_size > std::numeric_limits<uint64_t>::max() - offset
                 ? std::numeric_limits<uint64_t>::max()
                 : offset + rec.compressed_size;

    if (refuse_all) {
      item.status = refuse_all->first;
      item.reason = refuse_all->second;
    } else if (auto bad = provenance_refusal(item.provenance, accept)) {
      item.status = bad->first;
      item.reason = std::move(bad->second);
    } else if (offset > data_end) {
      item.status = ItemStatus::bad_checksum;
      item.reason = "truncated: entry data would end at byte " +
                    (offset == std::numeric_limits<uint64_t>::max() ? std::string("(overflow)")
                                                                    : std::to_string(offset)) +
                    ", the bundle's data ends at byte " + std::to_string(data_end);
    } else {
      std::string why;
      item.entry = load_entry(dctx.get(), rec, bytes.subspan(begin, rec.compressed_size), &why);
      if (!item.entry) {
        item.status = ItemStatus::bad_checksum;
        item.reason = std::move(why);
      }
    }
    out.items.push_back(std::move(item));
  }
  return out;
}

std::vector<uint8_t> read_hmac_key_file(const std::string& path) {
  const auto fail = [&](const std::string& why) -> Error {
    return Error("cache HMAC key file '" + path + "': " + why +
                 "; it must hold the key shared by bundle writers and readers");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail(std::string("cannot open: ") + std::strerror(errno));
  std::vector<uint8_t> key;
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw fail(std::string("cannot read: ") + std::strerror(err));
    }
    if (n == 0) break;
    key.insert(key.end(), buf, buf + n);
    if (key.size() > kMaxKeyFileBytes) {
      ::close(fd);
      throw fail("over " + std::to_string(kMaxKeyFileBytes) + " bytes, not a key");
    }
  }
  ::close(fd);
  // Editors and `echo` end a line; the newline is not part of the key, or a key written by
  // one tool would not match the same key written by another.
  if (!key.empty() && key.back() == '\n') {
    key.pop_back();
    if (!key.empty() && key.back() == '\r') key.pop_back();
  }
  if (key.empty()) throw fail("the key is empty");
  return key;
}

}  // namespace zc::cache
