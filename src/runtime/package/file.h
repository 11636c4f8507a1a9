// The file of an ahead-of-time package (include/zc/package.h): what it holds and how it is
// written and verified. Nothing here compiles, captures or loads code.
//
// The file is a magic ("ZCPACKG1"), the length of a cache bundle (cache/bundle.h), the bundle,
// and the weights section; the bundle's checksums, signature and refusals are the package's.
// The bundle holds three kinds of item:
//   - the manifest: the zc build and target the code was made for, and per specialization its
//     input signature, its captured graph (canonical bytes: the loader plans its regions from
//     it, exactly as the builder did) and where each graph input comes from (a call input or
//     a named weight);
//   - the weight index: each weight's name, dtype, shape and place in the weights section, and
//     the section's size and SHA-256 (so the signature covers the weights through it);
//   - one compiled graph (runtime/driver/artifact.h) per distinct graph hash: a repeated block
//   once;
//   - for calls that serve ranges of sizes, one size template (record and binary) per
//     structure hash of the lowered graphs it serves, as kernel-level items.
// Manifest and index are autotune-level items (records, not compiled code) under fixed keys;
// compiled graphs are graph-level items keyed by their graph hash. Every item names the zc
// build that wrote it, so the bundle refuses the whole package for another build. The weights
// stay out of the bundle, which would compress them (they barely compress), copy them and hash
// them twice. The target is the manifest's and is judged by package_refusal, which can tell a
// CPU that runs the code from one that does not without the compiler that a cache key's target
// fingerprint needs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "util/hash.h"
#include "zc/tensor.h"

namespace zc::runtime {

// Where a graph input's value comes from at call time.
struct PackageBinding {
  bool user = false;
  uint64_t input = 0;  // user: which of the call's inputs
  std::string weight;  // otherwise: the weight's name
  bool operator==(const PackageBinding&) const = default;
};

// A dim of a call's input that takes every size in [min, max].
struct PackageRange {
  uint64_t input = 0;
  int64_t dim = 0, min = 0, max = 0;
};

// One size of a call with ranges: the sizes of its ranges, in their order, and which of the
// call's graphs and binding lists it runs.
struct PackageSize {
  std::vector<int64_t> at;
  uint64_t graph = 0, bindings = 0;
};

struct PackageCall {
  std::vector<Shape> shapes;  // the call's inputs (with ranges: at the example's sizes)
  std::vector<DType> dtypes;
  std::vector<uint8_t> graph;            // ir::canonical_bytes of the captured graph
  std::vector<PackageBinding> bindings;  // one per graph input
  bool hierarchical = false;             // run as plan_regions' parts (Regions::Auto)
  // A call that serves ranges of sizes: every size's own captured graph (distinct ones once)
  // and bindings; `graph` and `bindings` are then the example's size's.
  std::vector<PackageRange> ranges;
  std::vector<PackageSize> sizes;
  std::vector<std::vector<uint8_t>> size_graphs;
  std::vector<std::vector<PackageBinding>> size_bindings;
};

struct PackageManifest {
  std::string zc_version, build_id;
  std::string backend;  // Backend::name()
  // The CPU code's target: the ISA level (toolchain/target.h), and for "native" the CPU
  // description it resolved to. `target` is the backend's full target fingerprint, shown in
  // refusals and describe(); a GPU backend's target is judged by it alone.
  std::string isa, native, target;
  bool bf16_products = false;  // MatmulPrecision::Bf16
  bool replay = false;         // CompileOptions::cuda_graphs
  std::vector<PackageCall> calls;
};

// A size template (runtime/dynamic/templates.h) as a package holds it: by the structure hash of
// the lowered graphs it serves.
struct PackageTemplate {
  std::vector<uint8_t> record, binary;
};

struct PackageContents {
  PackageManifest manifest;
  std::vector<std::pair<Digest, std::vector<uint8_t>>> graphs;  // encoded artifacts by hash
  std::vector<std::pair<Digest, PackageTemplate>> templates;    // by structure hash
  std::vector<std::pair<std::string, Tensor>> weights;          // CPU, contiguous
};

// Signed with `hmac_key` when it is not empty.
std::vector<uint8_t> write_package(const PackageContents& contents,
                                   std::span<const uint8_t> hmac_key = {});

// Verifies every item (checksums; with a key, the signature) and decodes them. Raises
// zc::Error naming the first reason to refuse the package: not a package, truncated, corrupt,
// unsigned or badly signed where a key is given, made by another zc build. The target is not
// judged here (package_refusal).
PackageContents read_package(std::span<const uint8_t> bytes,
                             std::span<const uint8_t> hmac_key = {});

// Why this process cannot run the code a package was made for (the CPU lacks the ISA level,
// a native package from another CPU, a GPU of another architecture), with what to do; empty
// when it can.
std::string package_refusal(const PackageManifest& m);

}  // namespace zc::runtime
