// The cache entry format, shared by every tier and by bundles.
//
// An entry is a header followed by a payload. The header holds a magic number, the format
// version, the cache level, the SHA-256 key the entry was stored under, the payload's size and
// SHA-256, the compile time the entry saves, its creation time, and a checksum of the header
// itself. A reader checks all of it against what it asked for; any mismatch (truncation, a
// flipped bit anywhere, an entry stored under another key or level, a newer format) makes the
// entry unusable, reported with a reason, never a crash and never a wrong payload.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/hash.h"

namespace zc::cache {

// Cache levels (DESIGN.md, section 3). The in-process code cache is not stored as entries.
enum class Level : uint8_t { graph = 1, lowering = 2, kernel = 3, autotune = 4 };
inline constexpr Level kLevels[] = {Level::graph, Level::lowering, Level::kernel, Level::autotune};
const char* level_name(Level l);  // "graph", ...
std::optional<Level> level_from_name(std::string_view s);

inline constexpr uint32_t kEntryFormatVersion = 1;
inline constexpr size_t kEntryHeaderSize = 128;

struct Entry {
  Level level = Level::graph;
  Digest key{};
  double compile_ms = 0;  // what a hit saves: the time it took to produce the payload
  uint64_t created_unix = 0;
  std::vector<uint8_t> payload;
};

// Header fields without the payload (for listings and verification).
struct EntryInfo {
  Level level = Level::graph;
  Digest key{};
  double compile_ms = 0;
  uint64_t created_unix = 0;
  uint64_t payload_size = 0;
};

std::vector<uint8_t> encode_entry(const Entry& e);
// The header alone (encode_entry's first kEntryHeaderSize bytes): lets a writer send header and
// payload without first copying them into one buffer.
std::array<uint8_t, kEntryHeaderSize> encode_entry_header(const Entry& e);

// Decodes and verifies bytes. `expect_level` / `expect_key` (when given) must match the
// header. On failure returns nullopt and sets *why to a one-line reason ("truncated: 100 of
// 4196 bytes", "payload checksum mismatch", "stored under another key", ...).
std::optional<Entry> decode_entry(std::span<const uint8_t> bytes, std::optional<Level> expect_level,
                                  const Digest* expect_key, std::string* why);

// decode_entry for a header and payload read into separate buffers: the payload moves into the
// returned entry instead of being copied (a tier reads a file straight into it).
std::optional<Entry> decode_entry_parts(std::span<const uint8_t> header,
                                        std::vector<uint8_t> payload,
                                        std::optional<Level> expect_level, const Digest* expect_key,
                                        std::string* why);

// Checks the header only (cheap listing); the payload is not verified.
std::optional<EntryInfo> peek_entry(std::span<const uint8_t> header_bytes, std::string* why);

}  // namespace zc::cache
