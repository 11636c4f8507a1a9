// Cache bundles (a portable cache, like torch.compile's Mega-Cache, with the checks it lacks):
// one file holding a manifest and compressed entries, optionally signed.
//
// Layout: magic and format version; a manifest (zc version and build id of the writer, and per
// entry: level, key, the build id, target fingerprint and toolchain identity it was made for,
// stored size, compressed size and SHA-256 of the encoded entry) followed by the manifest's own
// SHA-256; the zstd-compressed encoded entries (entry.h), each its own frame so one corrupt
// entry does not lose the others; and, when signed, an HMAC-SHA256 over everything before it.
//
// Reading never trusts the file: every length is bounds-checked, every entry's checksum is
// verified after decompression and its decoded header must match the manifest. A bundle cut in
// half, with a flipped byte or a bad signature is reported, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/entry.h"
#include "cache/keys.h"

namespace zc::cache {

struct BundleItem {
  Entry entry;
  Provenance provenance;
};

// Signs with `hmac_key` when given (non-empty).
std::vector<uint8_t> write_bundle(const std::vector<BundleItem>& items,
                                  std::span<const uint8_t> hmac_key = {});

enum class ItemStatus : uint8_t {
  ok,                 // verified and made for this build, target and toolchain
  bad_checksum,       // payload or entry corrupt
  wrong_build,        // made by another zc build
  wrong_target,       // made for another ISA level or CPU
  wrong_toolchain,    // made with another compiler
  bad_signature,      // the bundle's signature does not verify
  unsigned_required,  // a key is configured but the bundle is not signed
};
const char* item_status_name(ItemStatus s);

struct ReadItem {
  Level level = Level::graph;
  std::string key_hex;
  Provenance provenance;  // as the manifest states it (for listings and refusals)
  ItemStatus status = ItemStatus::ok;
  std::string reason;          // human-readable detail for refusals
  std::optional<Entry> entry;  // set when status == ok
};

struct BundleContents {
  std::string writer_version, writer_build_id;
  bool signed_bundle = false;
  // True only when a key was given and the signature verified. A signed bundle read without
  // a key is treated like an unsigned one: without a key there is nothing to verify against.
  bool signature_verified = false;
  std::vector<ReadItem> items;
};

// `expect` is this process's provenance (toolchain empty: no compiler, entries with binaries
// are still refused only on build or target). With a non-empty `hmac_key`, an unsigned or
// badly signed bundle refuses every item; without one, a signature is not checked (the
// per-entry checksums still are). Raises zc::Error only when the bytes are not a
// bundle at all or the manifest itself is unreadable (the message says which), since then no
// item can be reported.
BundleContents read_bundle(std::span<const uint8_t> bytes, const Provenance& expect,
                           std::span<const uint8_t> hmac_key = {});
// The same for a process with several targets (a CPU and a GPU): an item is accepted when it
// suits one of `accept`, and a refusal names the nearest (same kind of target).
BundleContents read_bundle(std::span<const uint8_t> bytes, std::span<const Provenance> accept,
                           std::span<const uint8_t> hmac_key = {});

// Reads an HMAC key from a file (the whole file, less one trailing newline, so a key written
// with `echo` works). Raises zc::Error naming the path when the file cannot be read or the
// key is empty: a configured but missing key must not silently turn verification off.
std::vector<uint8_t> read_hmac_key_file(const std::string& path);

}  // namespace zc::cache
