#include "runtime/package/file.h"

#include <array>
#include <cstring>
#include <optional>

#include "cache/bundle.h"
#include "codegen/backend.h"
#include "runtime/records/codec.h"
#include "toolchain/target.h"
#include "util/bytes.h"
#include "zc/error.h"
#include "zc/version.h"

namespace zc::runtime {

namespace {

constexpr std::array<uint8_t, 8> kMagic = {'Z', 'C', 'P', 'A', 'C', 'K', 'G', '1'};
// A package names the distinct graphs and weights of a model: bounds what a crafted count can
// make a reader reserve before the bytes run out.
constexpr uint64_t kMaxCount = uint64_t{1} << 20;
constexpr uint64_t kMaxRank = 64;

Digest fixed_key(const char* what) {
  return sha256(std::string("zc package ") + what + " v1");
}

DType read_dtype(RecordReader& r) {
  const uint8_t d = r.u8();
  if (d >= kNumDTypes) throw Error("package: unknown dtype " + std::to_string(d));
  return static_cast<DType>(d);
}

Shape read_shape(RecordReader& r) {
  const uint64_t rank = r.u64();
  if (rank > kMaxRank) throw Error("package: a shape of more than 64 dims");
  Shape s;
  for (uint64_t i = 0; i < rank; ++i) s.push_back(r.i64());
  for (int64_t d : s) {
    if (d < 0) throw Error("package: a negative size in shape " + shape_str(s));
  }
  return s;
}

void write_bindings(ByteWriter& w, const std::vector<PackageBinding>& bindings) {
  w.u64(bindings.size());
  for (const PackageBinding& b : bindings) {
    w.u8(b.user);
    if (b.user) {
      w.u64(b.input);
    } else {
      w.str(b.weight);
    }
  }
}

std::vector<PackageBinding> read_bindings(RecordReader& r, uint64_t inputs) {
  std::vector<PackageBinding> out;
  const uint64_t bindings = r.count(kMaxCount, "bindings");
  for (uint64_t i = 0; i < bindings; ++i) {
    PackageBinding b;
    b.user = r.u8() != 0;
    if (b.user) {
      b.input = r.u64();
      if (b.input >= inputs) throw Error("package manifest: a binding to a missing input");
    } else {
      b.weight = r.str();
    }
    out.push_back(std::move(b));
  }
  return out;
}

// A call with ranges: each range names an input's dim, each size names a graph and a binding
// list the call holds and gives one size per range.
void check_ranges(const PackageCall& c) {
  for (const PackageRange& r : c.ranges) {
    if (r.input >= c.shapes.size() || r.dim < 0 ||
        static_cast<size_t>(r.dim) >= c.shapes[r.input].size() || r.min > r.max) {
      throw Error("package manifest: a range of a missing input or dim");
    }
  }
  for (const PackageSize& s : c.sizes) {
    if (s.at.size() != c.ranges.size() || s.graph >= c.size_graphs.size() ||
        s.bindings >= c.size_bindings.size()) {
      throw Error("package manifest: a size of a missing graph or binding list");
    }
  }
}

std::vector<uint8_t> encode_manifest(const PackageManifest& m) {
  RecordWriter w(kPackageManifestFormat);
  w.str(m.zc_version);
  w.str(m.build_id);
  w.str(m.backend);
  w.str(m.isa);
  w.str(m.native);
  w.str(m.target);
  w.u8(m.bf16_products);
  w.u8(m.replay);
  w.u64(m.calls.size());
  for (const PackageCall& c : m.calls) {
    w.u64(c.shapes.size());
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      w.u8(static_cast<uint8_t>(c.dtypes[i]));
      w.i64s(c.shapes[i]);
    }
    w.u64(c.graph.size());
    w.raw(c.graph.data(), c.graph.size());
    write_bindings(w, c.bindings);
    w.u8(c.hierarchical);
    w.u64(c.ranges.size());
    for (const PackageRange& r : c.ranges) {
      w.u64(r.input);
      w.i64(r.dim);
      w.i64(r.min);
      w.i64(r.max);
    }
    w.u64(c.sizes.size());
    for (const PackageSize& s : c.sizes) {
      w.i64s(s.at);
      w.u64(s.graph);
      w.u64(s.bindings);
    }
    w.u64(c.size_graphs.size());
    for (const std::vector<uint8_t>& g : c.size_graphs) {
      w.u64(g.size());
      w.raw(g.data(), g.size());
    }
    w.u64(c.size_bindings.size());
    for (const std::vector<PackageBinding>& b : c.size_bindings) write_bindings(w, b);
  }
  return w.take();
}

PackageManifest decode_manifest(std::span<const uint8_t> bytes) {
  // A package is only ever read by the zc build that made it: another version is a damaged or
  // forged file.
  RecordReader r(bytes, kPackageManifestFormat);
  PackageManifest m;
  m.zc_version = r.str();
  m.build_id = r.str();
  m.backend = r.str();
  m.isa = r.str();
  m.native = r.str();
  m.target = r.str();
  m.bf16_products = r.u8() != 0;
  m.replay = r.u8() != 0;
  const uint64_t calls = r.count(kMaxCount, "calls");
  for (uint64_t k = 0; k < calls; ++k) {
    PackageCall c;
    const uint64_t inputs = r.count(kMaxCount, "inputs");
    for (uint64_t i = 0; i < inputs; ++i) {
      c.dtypes.push_back(read_dtype(r));
      c.shapes.push_back(read_shape(r));
    }
    auto graph = r.raw(r.u64());
    c.graph.assign(graph.begin(), graph.end());
    c.bindings = read_bindings(r, inputs);
    c.hierarchical = r.u8() != 0;
    const uint64_t ranges = r.count(kMaxCount, "ranges");
    for (uint64_t i = 0; i < ranges; ++i) {
      PackageRange pr;
      pr.input = r.u64();
      pr.dim = r.i64();
      pr.min = r.i64();
      pr.max = r.i64();
      c.ranges.push_back(pr);
    }
    const uint64_t sizes = r.count(kMaxCount, "sizes");
    for (uint64_t i = 0; i < sizes; ++i) {
      PackageSize ps;
      ps.at = r.i64s();
      ps.graph = r.u64();
      ps.bindings = r.u64();
      c.sizes.push_back(std::move(ps));
    }
    const uint64_t graphs = r.count(kMaxCount, "graphs");
    for (uint64_t i = 0; i < graphs; ++i) {
      auto g = r.raw(r.u64());
      c.size_graphs.emplace_back(g.begin(), g.end());
    }
    const uint64_t lists = r.count(kMaxCount, "binding lists");
    for (uint64_t i = 0; i < lists; ++i) c.size_bindings.push_back(read_bindings(r, inputs));
    check_ranges(c);
    m.calls.push_back(std::move(c));
  }
  r.finish("call");
  return m;
}

// The weights section: each tensor's bytes at a 64-byte aligned offset. Its index (names,
// dtypes, shapes, offsets) and the section's size and SHA-256 are a bundle item, so the
// bundle's checksums and signature cover the weights through it; the bytes themselves stay
// out of the bundle, where they would be compressed (weights barely compress), copied and
// hashed twice more at every load.
struct WeightRecord {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t offset = 0, size = 0;
};

struct WeightSection {
  std::vector<WeightRecord> records;
  std::vector<uint8_t> bytes;
};

constexpr uint64_t kWeightAlign = 64;

WeightSection lay_out_weights(const std::vector<std::pair<std::string, Tensor>>& weights) {
  WeightSection s;
  for (const auto& [name, tensor] : weights) {
    const Tensor t = (tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu())).contiguous();
    WeightRecord r{name, t.dtype(), t.shape(), 0, 0};
    r.offset = (s.bytes.size() + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
    r.size = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    s.bytes.resize(r.offset + r.size);
    if (r.size) std::memcpy(s.bytes.data() + r.offset, t.raw_data(), r.size);
    s.records.push_back(std::move(r));
  }
  return s;
}

std::vector<uint8_t> encode_weight_index(const WeightSection& s) {
  RecordWriter w(kPackageWeightsFormat);
  w.u64(s.records.size());
  for (const WeightRecord& r : s.records) {
    w.str(r.name);
    w.u8(static_cast<uint8_t>(r.dtype));
    w.i64s(r.shape);
    w.u64(r.offset);
    w.u64(r.size);
  }
  w.u64(s.bytes.size());
  const Digest sum = sha256(s.bytes);
  w.raw(sum.data(), sum.size());
  return w.take();
}

struct WeightIndex {
  std::vector<WeightRecord> records;
  uint64_t section_size = 0;
  Digest sum{};
};

WeightIndex decode_weight_index(std::span<const uint8_t> bytes) {
  RecordReader r(bytes, kPackageWeightsFormat);
  WeightIndex index;
  const uint64_t n = r.count(kMaxCount, "weights");
  for (uint64_t k = 0; k < n; ++k) {
    WeightRecord w;
    w.name = r.str();
    w.dtype = read_dtype(r);
    w.shape = read_shape(r);
    w.offset = r.u64();
    w.size = r.u64();
    index.records.push_back(std::move(w));
  }
  index.section_size = r.u64();
  std::span<const uint8_t> sum = r.raw(index.sum.size());
  std::memcpy(index.sum.data(), sum.data(), sum.size());
  r.finish("field");
  for (const WeightRecord& w : index.records) {
    // The product is checked against the bytes present, so sizes that overflow it cannot pass.
    uint64_t numel = 1;
    for (int64_t d : w.shape) {
      if (d != 0 && numel > w.size / static_cast<uint64_t>(d)) numel = w.size + 1;
      numel *= static_cast<uint64_t>(d);
    }
    if (numel > w.size || numel * dtype_size(w.dtype) != w.size || w.offset > index.section_size ||
        w.size > index.section_size - w.offset) {
      throw Error("package weight index: " + w.name + " of shape " + shape_str(w.shape) +
                  " claims bytes [" + std::to_string(w.offset) + ", +" + std::to_string(w.size) +
                  ") of a " + std::to_string(index.section_size) + "-byte section");
    }
  }
  return index;
}

cache::BundleItem item(cache::Level level, const Digest& key, std::vector<uint8_t> payload,
                       const std::string& build) {
  cache::BundleItem it;
  it.entry.level = level;
  it.entry.key = key;
  it.entry.payload = std::move(payload);
  it.provenance.build_id = build;
  return it;
}

}  // namespace

std::vector<uint8_t> write_package(const PackageContents& contents,
                                   std::span<const uint8_t> hmac_key) {
  const std::string& build = contents.manifest.build_id;
  const WeightSection weights = lay_out_weights(contents.weights);
  std::vector<cache::BundleItem> items;
  items.push_back(item(cache::Level::autotune, fixed_key("manifest"),
                       encode_manifest(contents.manifest), build));
  items.push_back(
      item(cache::Level::autotune, fixed_key("weight index"), encode_weight_index(weights), build));
  for (const auto& [hash, artifact] : contents.graphs) {
    items.push_back(item(cache::Level::graph, hash, artifact, build));
  }
  for (const auto& [structure, t] : contents.templates) {
    ByteWriter tw;
    tw.u64(t.record.size());
    tw.raw(t.record.data(), t.record.size());
    tw.raw(t.binary.data(), t.binary.size());
    items.push_back(item(cache::Level::kernel, structure, tw.take(), build));
  }
  const std::vector<uint8_t> bundle = cache::write_bundle(items, hmac_key);
  ByteWriter w;
  w.raw(kMagic.data(), kMagic.size());
  w.u64(bundle.size());
  w.raw(bundle.data(), bundle.size());
  w.raw(weights.bytes.data(), weights.bytes.size());
  return w.take();
}

PackageContents read_package(std::span<const uint8_t> bytes, std::span<const uint8_t> hmac_key) {
  constexpr size_t kHeader = kMagic.size() + 8;
  if (bytes.size() < kMagic.size() && std::memcmp(bytes.data(), kMagic.data(), bytes.size()) == 0) {
    throw Error("package refused: it is truncated (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (bytes.size() < kMagic.size() || std::memcmp(bytes.data(), kMagic.data(), kMagic.size())) {
    const bool bundle = bytes.size() >= 8 && std::memcmp(bytes.data(), "ZCBUNDLE", 8) == 0;
    throw Error(bundle ? std::string("not a zc package but a cache bundle; load it with "
                                     "zc::cache::load_artifacts or zc cache import")
                       : "not a zc package (" + std::to_string(bytes.size()) +
                             " bytes, no package magic at the start)");
  }
  if (bytes.size() < kHeader) {
    throw Error("package refused: it is truncated (" + std::to_string(bytes.size()) +
                " bytes, shorter than its header)");
  }
  uint64_t bundle_size = 0;
  std::memcpy(&bundle_size, bytes.data() + kMagic.size(), 8);
  if (bundle_size > bytes.size() - kHeader) {
    throw Error("package refused: it is truncated (its compiled code claims " +
                std::to_string(bundle_size) + " bytes, " + std::to_string(bytes.size() - kHeader) +
                " follow the header)");
  }
  cache::BundleContents bundle;
  try {
    bundle = cache::read_bundle(bytes.subspan(kHeader, bundle_size),
                                cache::Provenance{zc::build_id(), "", ""}, hmac_key);
  } catch (const Error& e) {
    throw Error(std::string("package refused: ") + e.what());
  }
  const Digest manifest_key = fixed_key("manifest"), index_key = fixed_key("weight index");
  std::optional<PackageManifest> manifest;
  std::optional<WeightIndex> index;
  PackageContents out;
  for (cache::ReadItem& it : bundle.items) {
    using cache::ItemStatus;
    switch (it.status) {
      case ItemStatus::ok:
        break;
      case ItemStatus::wrong_build:
        throw Error("package refused: it was made by zc build '" + it.provenance.build_id +
                    "' and this program is zc build '" + zc::build_id() +
                    "'; a package runs only with the zc build that made it: build it again "
                    "with this one (zc package)");
      case ItemStatus::bad_signature:
      case ItemStatus::unsigned_required:
        throw Error("package refused: " + it.reason +
                    " (ZC_CACHE_HMAC_KEY_FILE); sign it with the same key when building it");
      default:
        throw Error("package refused: it is truncated or corrupt (" + it.reason +
                    "); copy or build it again");
    }
    std::vector<uint8_t>& payload = it.entry->payload;
    if (it.level == cache::Level::autotune && it.entry->key == manifest_key) {
      manifest = decode_manifest(payload);
    } else if (it.level == cache::Level::autotune && it.entry->key == index_key) {
      index = decode_weight_index(payload);
    } else if (it.level == cache::Level::graph) {
      out.graphs.emplace_back(it.entry->key, std::move(payload));
    } else if (it.level == cache::Level::kernel) {
      ByteReader tr(payload, "package size template");
      PackageTemplate t;
      auto record = tr.raw(tr.u64());
      t.record.assign(record.begin(), record.end());
      auto binary = tr.raw(tr.remaining());
      t.binary.assign(binary.begin(), binary.end());
      out.templates.emplace_back(it.entry->key, std::move(t));
    } else {
      throw Error("package refused: it holds an item it should not (" +
                  std::string(cache::level_name(it.level)) + " " + it.key_hex.substr(0, 16) +
                  "); build it again");
    }
  }
  if (!manifest || !index) {
    throw Error(std::string("package refused: it holds no ") +
                (manifest ? "weight index" : "manifest") + "; build it again");
  }
  const std::span<const uint8_t> section = bytes.subspan(kHeader + bundle_size);
  if (section.size() != index->section_size) {
    throw Error("package refused: it is truncated or corrupt (its weights are " +
                std::to_string(section.size()) + " bytes, its index says " +
                std::to_string(index->section_size) + "); copy or build it again");
  }
  if (sha256(section) != index->sum) {
    throw Error(
        "package refused: it is corrupt (the weights' checksum does not match); copy or "
        "build it again");
  }
  for (const WeightRecord& w : index->records) {
    Tensor t = Tensor::empty(w.shape, w.dtype);
    if (w.size) std::memcpy(t.raw_data(), section.data() + w.offset, w.size);
    out.weights.emplace_back(w.name, std::move(t));
  }
  out.manifest = std::move(*manifest);
  return out;
}

std::string package_refusal(const PackageManifest& m) {
  const codegen::Backend* backend = codegen::find_backend(m.backend);
  if (!backend) {
    return "it runs on backend \"" + m.backend + "\", which this build of zc does not have";
  }
  if (backend->device() == Device::Type::cpu) {
    if (m.isa == "native") {
      // What a native target resolves to, read from cpuid (no compiler is asked).
      const std::string here = toolchain::host_cpu_fingerprint();
      if (here != m.native) {
        return "its code was built for the native CPU of the machine that made it {" + m.native +
               "}, and this CPU is {" + here +
               "}; build it with ZC_CPU_ISA set to a level every machine runs (x86-64-v2, "
               "x86-64-v3, x86-64-v4) to move it between machines";
      }
    } else if (!toolchain::host_supports(m.isa)) {
      return "its code was built for the ISA level " + m.isa + ", which this CPU cannot run " +
             "(it runs " + toolchain::host_isa_level() +
             "); build it with ZC_CPU_ISA set to a level this CPU runs";
    }
    return "";
  }
  const std::string why = backend->unavailable_reason();
  if (!why.empty()) return "its backend \"" + m.backend + "\" cannot run here: " + why;
  const std::string here = backend->key_parts().target;
  if (here != m.target) {
    return "its code was built for " + m.target + ", and this machine's " + m.backend +
           " target is " + here + "; build it on a machine like this one";
  }
  return "";
}

}  // namespace zc::runtime
