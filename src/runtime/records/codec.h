// The one encoding of the records the runtime keeps in the cache and in packages: compiled graph
// artifacts, size templates and the graphs they served, sizes-first records, training graphs,
// load hints, compiled functions' call records, cuBLASLt product records, CPU GEMM choices, and
// a package's manifest and weight index.
//
// Fields are little-endian and fixed-width (util/bytes.h). Each record begins with its format's
// tag, a u32 (a version, or four letters for the older formats), so a record of another format
// or version is refused before anything else is read. Counts are bounded before anything is
// allocated, and a record ends where its last field does. Every refusal names the record and
// what is wrong ("load hint: version 7, expected 1"); callers log it and treat it as a miss.
//
// Every format is declared here, once: the name its refusals and cache keys use, and its tag.
// Changing what a record holds means a new tag.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "util/bytes.h"

namespace zc::runtime {

struct RecordFormat {
  const char* name;    // in refusals: "load hint"
  const char* key;     // in cache keys, with the version: "load hint v1"; null: not keyed so
  uint32_t tag;        // the record's first u32: its version
  bool magic = false;  // the tag is four letters (refused as "bad magic", not a version)
};

// Artifacts (the graph level): backend, lowered graph, binary.
inline constexpr RecordFormat kArtifactFormat{"compiled graph artifact", nullptr, 0x32616370,
                                              true};  // "pca2"
// A size template, and a graph one served (the graph level).
inline constexpr RecordFormat kSizeTemplateFormat{"size template", nullptr, 0x3174737a,
                                                  true};  // "zst1"
inline constexpr RecordFormat kSizedGraphFormat{"sized graph record", nullptr, 0x3164737a,
                                                true};  // "zsd1"
// The size templates stored under one lowered structure: graphs of one structure whose other
// sizes differ (an activation at 32 channels and at 160) have one each.
inline constexpr RecordFormat kSizeTemplatesFormat{"size templates of a structure", nullptr,
                                                   0x3274737a, true};  // "zst2"
// The dims a first call's templates cover (the graph level).
inline constexpr RecordFormat kSizesFirstFormat{"sizes-first record", nullptr, 0x3166737a,
                                                true};  // "zsf1"
// A package's manifest and weight index (its bundle's records: runtime/package/file.h).
inline constexpr RecordFormat kPackageManifestFormat{"package manifest", nullptr, 2};
inline constexpr RecordFormat kPackageWeightsFormat{"package weight index", nullptr, 1};
// A training call's forward and backward graphs (the lowering level).
inline constexpr RecordFormat kTrainingGraphsFormat{"stored training graphs", "training graphs",
                                                    0x3167747a, true};  // "ztg1"
// Hints and choices (the autotune level).
inline constexpr RecordFormat kLoadHintFormat{"load hint", "load hint", 1};
// 2: metas in ops/meta_bytes.h's layout (version 1 had its own).
inline constexpr RecordFormat kCallRecordFormat{"compiled function's call record",
                                                "compiled function calls", 2};
inline constexpr RecordFormat kGemmRecordFormat{"cuBLASLt products record", "cublaslt products", 1};
// 2: problems say whether B is a weight (GemmProblem::b_weight), which adds packed candidates.
inline constexpr RecordFormat kTuningFormat{"autotune record (CPU GEMM choice)", "cpu gemm choice",
                                            2};

// "load hint v1": what a record's cache key names it by.
std::string record_key_name(const RecordFormat& f);

class RecordWriter : public ByteWriter {
 public:
  explicit RecordWriter(const RecordFormat& f) { u32(f.tag); }
};

class RecordReader : public ByteReader {
 public:
  // Reads and checks the format's tag.
  RecordReader(std::span<const uint8_t> bytes, const RecordFormat& f);
  // A count (u64, or u32 for the formats that store it so) of `items`, at most `max`:
  // "5 calls, at most 4". Also refused: more items than bytes left, each being one at least.
  uint64_t count(uint64_t max, std::string_view items);
  uint32_t count32(uint32_t max, std::string_view items);
  // Refuses the record, naming it: "<name>: <why>".
  [[noreturn]] void fail(const std::string& why) const;
  // Refuses bytes after the record's last field: "3 bytes after the last <item>".
  void finish(std::string_view last_item);

 private:
  uint64_t checked_count(uint64_t n, uint64_t max, std::string_view items) const;
  const RecordFormat& format_;
};

}  // namespace zc::runtime
