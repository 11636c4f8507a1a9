// Fuzzes the cache entry format and the disk tier's read path: arbitrary bytes must be refused
// with a reason (never a crash, an out-of-bounds read or undefined behaviour), and an entry
// built from the input must survive a round trip while any single corrupted byte is caught.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/entry.h"
#include "cache/lifetime_stats.h"

namespace {

using namespace zc::cache;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "entry_fuzz: %s\n", what);
    std::abort();
  }
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// A store in a private temp directory, removed at exit.
DiskTier& store() {
  static std::string root = [] {
    char tmpl[] = "/tmp/zc_entry_fuzz.XXXXXX";
    require(::mkdtemp(tmpl) != nullptr, "mkdtemp failed");
    std::string r = tmpl;
    static std::string to_remove = r;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return r;
  }();
  static std::unique_ptr<DiskTier> tier = open_disk_tier({root});
  return *tier;
}

void check_decoders(std::span<const uint8_t> in) {
  std::string why;
  auto any = decode_entry(in, std::nullopt, nullptr, &why);
  require(any || !why.empty(), "refused without a reason");
  if (any) {
    // Whatever decodes re-encodes to an entry that decodes the same.
    auto again = decode_entry(encode_entry(*any), any->level, &any->key, nullptr);
    require(
        again && again->payload == any->payload && same_bits(again->compile_ms, any->compile_ms),
        "decoded entry does not round-trip");
  }
  zc::Digest key{};
  if (in.size() >= 16 + key.size()) std::memcpy(key.data(), in.data() + 16, key.size());
  auto keyed = decode_entry(in, Level::kernel, &key, &why);
  require(!keyed || (any && keyed->level == Level::kernel), "expectations ignored");
  decode_entry(in, Level::graph, &key, nullptr);

  auto info = peek_entry(in, &why);
  require(!any || info, "decodable entry fails peek");
  if (info && in.size() >= kEntryHeaderSize) {
    auto parts = decode_entry_parts(in.first(kEntryHeaderSize),
                                    std::vector<uint8_t>(in.begin() + kEntryHeaderSize, in.end()),
                                    std::nullopt, nullptr, &why);
    require(parts.has_value() == any.has_value(), "decode_entry_parts disagrees with decode_entry");
  }
  decode_lifetime_stats(in, &why);
}

void check_round_trip(std::span<const uint8_t> in) {
  if (in.empty()) return;
  Entry e;
  e.level = kLevels[in[0] % 4];
  e.key = zc::sha256(in);
  if (in.size() >= 9) std::memcpy(&e.compile_ms, in.data() + 1, 8);
  e.created_unix = in.size();
  e.payload.assign(in.begin(), in.end());
  std::vector<uint8_t> bytes = encode_entry(e);
  std::string why;
  auto d = decode_entry(bytes, e.level, &e.key, &why);
  require(d && d->payload == e.payload && d->key == e.key && d->level == e.level &&
              same_bits(d->compile_ms, e.compile_ms) && d->created_unix == e.created_unix,
          "round trip failed");
  // Any one changed byte is caught, and so is any truncation.
  size_t pos = (static_cast<size_t>(in[in.size() - 1]) * 131 + in.size()) % bytes.size();
  bytes[pos] ^= static_cast<uint8_t>(in[in.size() / 2] | 1);
  require(!decode_entry(bytes, e.level, &e.key, &why), "corrupted byte accepted");
  bytes[pos] ^= static_cast<uint8_t>(in[in.size() / 2] | 1);
  require(!decode_entry(std::span(bytes).first(pos), e.level, &e.key, &why),
          "truncated entry accepted");
}

// The disk tier reads a file holding the input: a hit only for a valid entry of that key.
void check_disk_read(std::span<const uint8_t> in) {
  zc::Digest key{};
  if (in.size() >= 16 + key.size()) std::memcpy(key.data(), in.data() + 16, key.size());
  DiskTier& t = store();
  std::string path = t.entry_path(Level::kernel, key);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(in.data()), static_cast<std::streamsize>(in.size()));
  }
  GetResult r = t.get(Level::kernel, key);
  bool valid = decode_entry(in, Level::kernel, &key, nullptr).has_value();
  require((r.outcome == Outcome::hit) == valid, "disk tier disagrees with decode_entry");
  require(r.outcome != Outcome::error || !std::filesystem::exists(path), "bad file kept");
  ::unlink(path.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  check_decoders(in);
  check_round_trip(in);
  // File I/O is slow next to decoding: exercise the read path on a share of the inputs.
  if (size > 0 && data[size - 1] % 16 == 0) check_disk_read(in);
  return 0;
}
