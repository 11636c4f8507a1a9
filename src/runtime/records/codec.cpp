#include "runtime/records/codec.h"

#include "zc/error.h"

namespace zc::runtime {

std::string record_key_name(const RecordFormat& f) {
  std::string tag = " v" + std::to_string(f.tag);
  if (f.magic) {
    tag = " ";
    for (int shift = 0; shift < 32; shift += 8) tag += static_cast<char>(f.tag >> shift & 0xff);
  }
  return std::string(f.key ? f.key : f.name) + tag;
}

RecordReader::RecordReader(std::span<const uint8_t> bytes, const RecordFormat& f)
    : ByteReader(bytes, f.name), format_(f) {
  if (bytes.size() < 4) fail("truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (const uint32_t tag = u32(); tag != f.tag) {
    if (f.magic) fail("bad magic");
    fail("version " + std::to_string(tag) + ", expected " + std::to_string(f.tag));
  }
}

uint64_t RecordReader::count(uint64_t max, std::string_view items) {
  return checked_count(u64(), max, items);
}

uint32_t RecordReader::count32(uint32_t max, std::string_view items) {
  return static_cast<uint32_t>(checked_count(u32(), max, items));
}

uint64_t RecordReader::checked_count(uint64_t n, uint64_t max, std::string_view items) const {
  if (n > max)
    fail(std::to_string(n) + " " + std::string(items) + ", at most " + std::to_string(max));
  if (n > remaining()) {
    fail(std::to_string(n) + " " + std::string(items) + " claimed in " +
         std::to_string(remaining()) + " bytes (truncated)");
  }
  return n;
}

void RecordReader::fail(const std::string& why) const {
  throw Error(std::string(format_.name) + ": " + why);
}

void RecordReader::finish(std::string_view last_item) {
  if (remaining() != 0) {
    fail(std::to_string(remaining()) + " bytes after the last " + std::string(last_item) +
         " (trailing data)");
  }
}

}  // namespace zc::runtime
