#include "cache/entry.h"

#include <algorithm>
#include <cstring>

namespace zc::cache {

namespace {

// Header layout, little-endian, 128 bytes:
//   0  magic "ZCENTRY\0"          8
//   8  format version u32         4
//  12  level u8, 3 reserved bytes 4
//  16  key                        32
//  48  payload size u64           8
//  56  payload SHA-256            32
//  88  compile_ms f64             8
//  96  created_unix u64           8
// 104  reserved, written as zero 16
// 120  header checksum u64        8   (first 8 bytes of SHA-256 over bytes 0..120)
// The reserved bytes are covered by the checksum, so a flipped bit anywhere in the header is
// caught, and a later format can use them without moving any field.
constexpr uint8_t kMagic[8] = {'Z', 'C', 'E', 'N', 'T', 'R', 'Y', 0};
constexpr size_t kOffVersion = 8;
constexpr size_t kOffLevel = 12;
constexpr size_t kOffKey = 16;
constexpr size_t kOffPayloadSize = 48;
constexpr size_t kOffPayloadSha = 56;
constexpr size_t kOffCompileMs = 88;
constexpr size_t kOffCreated = 96;
constexpr size_t kOffChecksum = 120;
static_assert(kOffChecksum + 8 == kEntryHeaderSize);

template <class T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

uint64_t header_checksum(const uint8_t* h) {
  Digest d = sha256(std::span<const uint8_t>(h, kOffChecksum));
  return load<uint64_t>(d.data());
}

bool valid_level(uint8_t v) {
  return v >= 1 && v <= 4;
}

std::string short_hex(const uint8_t* key) {
  return hex(std::span<const uint8_t>(key, 8)) + "...";
}

void fail(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
}

// Checks everything the header alone can tell; fills `info`.
bool check_header(std::span<const uint8_t> bytes, EntryInfo* info, std::string* why) {
  if (bytes.size() < kEntryHeaderSize) {
    fail(why, bytes.empty() ? std::string("empty")
                            : "truncated: " + std::to_string(bytes.size()) + " of " +
                                  std::to_string(kEntryHeaderSize) + " header bytes");
    return false;
  }
  const uint8_t* h = bytes.data();
  if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0) {
    fail(why, "not a cache entry (bad magic)");
    return false;
  }
  // The version is read before the checksum: a newer writer may checksum differently.
  uint32_t version = load<uint32_t>(h + kOffVersion);
  if (version != kEntryFormatVersion) {
    fail(why, version > kEntryFormatVersion
                  ? "format version " + std::to_string(version) + " is newer than this zc's " +
                        std::to_string(kEntryFormatVersion)
                  : "unknown format version " + std::to_string(version));
    return false;
  }
  if (load<uint64_t>(h + kOffChecksum) != header_checksum(h)) {
    fail(why, "header checksum mismatch");
    return false;
  }
  uint8_t level = h[kOffLevel];
  if (!valid_level(level)) {
    fail(why, "unknown level " + std::to_string(level));
    return false;
  }
  info->level = static_cast<Level>(level);
  std::memcpy(info->key.data(), h + kOffKey, info->key.size());
  info->payload_size = load<uint64_t>(h + kOffPayloadSize);
  info->compile_ms = load<double>(h + kOffCompileMs);
  info->created_unix = load<uint64_t>(h + kOffCreated);
  return true;
}

bool verify(std::span<const uint8_t> header, std::span<const uint8_t> payload,
            std::optional<Level> expect_level, const Digest* expect_key, EntryInfo* info,
            std::string* why) {
  if (!check_header(header, info, why)) return false;
  if (header.size() != kEntryHeaderSize) {
    fail(why, "header of " + std::to_string(header.size()) + " bytes, expected " +
                  std::to_string(kEntryHeaderSize));
    return false;
  }
  if (expect_level && info->level != *expect_level) {
    fail(why, std::string("stored as level ") + level_name(info->level) + ", expected " +
                  level_name(*expect_level));
    return false;
  }
  if (expect_key && info->key != *expect_key) {
    fail(why, "stored under another key (" + short_hex(info->key.data()) + ")");
    return false;
  }
  if (info->payload_size > payload.size()) {
    fail(why, "truncated: payload " + std::to_string(payload.size()) + " of " +
                  std::to_string(info->payload_size) + " bytes");
    return false;
  }
  if (info->payload_size < payload.size()) {
    fail(why, "trailing data: " + std::to_string(payload.size() - info->payload_size) +
                  " bytes after the payload");
    return false;
  }
  Digest ps = sha256(payload);
  if (std::memcmp(ps.data(), header.data() + kOffPayloadSha, ps.size()) != 0) {
    fail(why, "payload checksum mismatch");
    return false;
  }
  return true;
}

Entry make_entry(const EntryInfo& info, std::vector<uint8_t> payload) {
  Entry e;
  e.level = info.level;
  e.key = info.key;
  e.compile_ms = info.compile_ms;
  e.created_unix = info.created_unix;
  e.payload = std::move(payload);
  return e;
}

}  // namespace

const char* level_name(Level l) {
  switch (l) {
    case Level::graph:
      return "graph";
    case Level::lowering:
      return "lowering";
    case Level::kernel:
      return "kernel";
    case Level::autotune:
      return "autotune";
  }
  return "unknown";
}

std::optional<Level> level_from_name(std::string_view s) {
  for (Level l : kLevels) {
    if (s == level_name(l)) return l;
  }
  return std::nullopt;
}

std::array<uint8_t, kEntryHeaderSize> encode_entry_header(const Entry& e) {
  std::array<uint8_t, kEntryHeaderSize> h{};
  std::memcpy(h.data(), kMagic, sizeof(kMagic));
  store<uint32_t>(h.data() + kOffVersion, kEntryFormatVersion);
  h[kOffLevel] = static_cast<uint8_t>(e.level);
  std::memcpy(h.data() + kOffKey, e.key.data(), e.key.size());
  store<uint64_t>(h.data() + kOffPayloadSize, e.payload.size());
  Digest ps = sha256(e.payload);
  std::memcpy(h.data() + kOffPayloadSha, ps.data(), ps.size());
  store<double>(h.data() + kOffCompileMs, e.compile_ms);
  store<uint64_t>(h.data() + kOffCreated, e.created_unix);
  store<uint64_t>(h.data() + kOffChecksum, header_checksum(h.data()));
  return h;
}

std::vector<uint8_t> encode_entry(const Entry& e) {
  auto h = encode_entry_header(e);
  std::vector<uint8_t> out;
  out.reserve(h.size() + e.payload.size());
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), e.payload.begin(), e.payload.end());
  return out;
}

std::optional<EntryInfo> peek_entry(std::span<const uint8_t> header_bytes, std::string* why) {
  EntryInfo info;
  if (!check_header(header_bytes, &info, why)) return std::nullopt;
  return info;
}

std::optional<Entry> decode_entry_parts(std::span<const uint8_t> header,
                                        std::vector<uint8_t> payload,
                                        std::optional<Level> expect_level, const Digest* expect_key,
                                        std::string* why) {
  EntryInfo info;
  if (!verify(header, payload, expect_level, expect_key, &info, why)) return std::nullopt;
  return make_entry(info, std::move(payload));
}

std::optional<Entry> decode_entry(std::span<const uint8_t> bytes, std::optional<Level> expect_level,
                                  const Digest* expect_key, std::string* why) {
  size_t split = std::min(bytes.size(), kEntryHeaderSize);
  auto header = bytes.first(split);
  auto payload = bytes.subspan(split);
  EntryInfo info;
  // Verified in place, so a refused entry costs no copy of its payload.
  if (!verify(header, payload, expect_level, expect_key, &info, why)) return std::nullopt;
  return make_entry(info, std::vector<uint8_t>(payload.begin(), payload.end()));
}

}  // namespace zc::cache
