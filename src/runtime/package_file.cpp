#include "runtime/package_file.h"

#include <cstring>
#include <optional>

#include "cache/bundle.h"
#include "codegen/backend.h"
#include "toolchain/target.h"
#include "util/bytes.h"
#include "zc/error.h"
#include "zc/version.h"

namespace zc::runtime {

namespace {

constexpr uint32_t kManifestVersion = 1;
constexpr uint32_t kWeightsVersion = 1;
// A package names the distinct graphs and weights of a model: bounds what a crafted count can
// make a reader reserve before the bytes run out.
constexpr uint64_t kMaxCount = uint64_t{1} << 20;
constexpr uint64_t kMaxRank = 64;

Digest fixed_key(const char* what) {
  return sha256(std::string("zc package ") + what + " v1");
}

uint64_t count(ByteReader& r, const char* what) {
  const uint64_t n = r.u64();
  if (n > kMaxCount || n > r.remaining()) {
    throw Error(std::string("package manifest: ") + std::to_string(n) + " " + what +
                " claimed in " + std::to_string(r.remaining()) + " bytes");
  }
  return n;
}

DType read_dtype(ByteReader& r) {
  const uint8_t d = r.u8();
  if (d >= kNumDTypes) throw Error("package: unknown dtype " + std::to_string(d));
  return static_cast<DType>(d);
}

Shape read_shape(ByteReader& r) {
  const uint64_t rank = r.u64();
  if (rank > kMaxRank) throw Error("package: a shape of more than 64 dims");
  Shape s;
  for (uint64_t i = 0; i < rank; ++i) s.push_back(r.i64());
  for (int64_t d : s) {
    if (d < 0) throw Error("package: a negative size in shape " + shape_str(s));
  }
  return s;
}

std::vector<uint8_t> encode_manifest(const PackageManifest& m) {
  ByteWriter w;
  w.u32(kManifestVersion);
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
    w.u64(c.bindings.size());
    for (const PackageBinding& b : c.bindings) {
      w.u8(b.user);
      if (b.user) {
        w.u64(b.input);
      } else {
        w.str(b.weight);
      }
    }
    w.u8(c.hierarchical);
  }
  return w.take();
}

PackageManifest decode_manifest(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "package manifest");
  if (const uint32_t v = r.u32(); v != kManifestVersion) {
    throw Error("package manifest version " + std::to_string(v) + ", this zc reads version " +
                std::to_string(kManifestVersion));
  }
  PackageManifest m;
  m.zc_version = r.str();
  m.build_id = r.str();
  m.backend = r.str();
  m.isa = r.str();
  m.native = r.str();
  m.target = r.str();
  m.bf16_products = r.u8() != 0;
  m.replay = r.u8() != 0;
  const uint64_t calls = count(r, "calls");
  for (uint64_t k = 0; k < calls; ++k) {
    PackageCall c;
    const uint64_t inputs = count(r, "inputs");
    for (uint64_t i = 0; i < inputs; ++i) {
      c.dtypes.push_back(read_dtype(r));
      c.shapes.push_back(read_shape(r));
    }
    auto graph = r.raw(r.u64());
    c.graph.assign(graph.begin(), graph.end());
    const uint64_t bindings = count(r, "bindings");
    for (uint64_t i = 0; i < bindings; ++i) {
      PackageBinding b;
      b.user = r.u8() != 0;
      if (b.user) {
        b.input = r.u64();
        if (b.input >= inputs) throw Error("package manifest: a binding to a missing input");
      } else {
        b.weight = r.str();
      }
      c.bindings.push_back(std::move(b));
    }
    c.hierarchical = r.u8() != 0;
    m.calls.push_back(std::move(c));
  }
  if (r.remaining() != 0) throw Error("package manifest: trailing bytes");
  return m;
}

std::vector<uint8_t> encode_weights(const std::vector<std::pair<std::string, Tensor>>& weights) {
  ByteWriter w;
  w.u32(kWeightsVersion);
  w.u64(weights.size());
  for (const auto& [name, tensor] : weights) {
    const Tensor t = (tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu())).contiguous();
    w.str(name);
    w.u8(static_cast<uint8_t>(t.dtype()));
    w.i64s(t.shape());
    const uint64_t n = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    w.u64(n);
    if (n) w.raw(t.raw_data(), n);
  }
  return w.take();
}

std::vector<std::pair<std::string, Tensor>> decode_weights(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "package weights");
  if (const uint32_t v = r.u32(); v != kWeightsVersion) {
    throw Error("package weights version " + std::to_string(v) + ", this zc reads version " +
                std::to_string(kWeightsVersion));
  }
  std::vector<std::pair<std::string, Tensor>> out;
  const uint64_t n = count(r, "weights");
  for (uint64_t k = 0; k < n; ++k) {
    std::string name = r.str();
    const DType dtype = read_dtype(r);
    const Shape shape = read_shape(r);
    const uint64_t size = r.u64();
    std::span<const uint8_t> data = r.raw(size);
    // The product is checked against the bytes present, so sizes that overflow it cannot pass.
    uint64_t numel = 1;
    for (int64_t d : shape) {
      if (d != 0 && numel > size / static_cast<uint64_t>(d)) numel = size + 1;
      numel *= static_cast<uint64_t>(d);
    }
    if (numel > size || numel * dtype_size(dtype) != size) {
      throw Error("package weights: " + name + " of shape " + shape_str(shape) + " has " +
                  std::to_string(size) + " bytes");
    }
    Tensor t = Tensor::empty(shape, dtype);
    if (size) std::memcpy(t.raw_data(), data.data(), size);
    out.emplace_back(std::move(name), std::move(t));
  }
  if (r.remaining() != 0) throw Error("package weights: trailing bytes");
  return out;
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
  std::vector<cache::BundleItem> items;
  items.push_back(item(cache::Level::autotune, fixed_key("manifest"),
                       encode_manifest(contents.manifest), build));
  items.push_back(
      item(cache::Level::autotune, fixed_key("weights"), encode_weights(contents.weights), build));
  for (const auto& [hash, artifact] : contents.graphs) {
    items.push_back(item(cache::Level::graph, hash, artifact, build));
  }
  return cache::write_bundle(items, hmac_key);
}

PackageContents read_package(std::span<const uint8_t> bytes, std::span<const uint8_t> hmac_key) {
  cache::BundleContents bundle;
  try {
    bundle = cache::read_bundle(bytes, cache::Provenance{zc::build_id(), "", ""}, hmac_key);
  } catch (const Error& e) {
    throw Error(std::string("not a usable zc package: ") + e.what());
  }
  const Digest manifest_key = fixed_key("manifest"), weights_key = fixed_key("weights");
  std::optional<PackageManifest> manifest;
  PackageContents out;
  bool have_weights = false;
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
    const std::vector<uint8_t>& payload = it.entry->payload;
    if (it.level == cache::Level::autotune && it.entry->key == manifest_key) {
      manifest = decode_manifest(payload);
    } else if (it.level == cache::Level::autotune && it.entry->key == weights_key) {
      out.weights = decode_weights(payload);
      have_weights = true;
    } else if (it.level == cache::Level::graph) {
      out.graphs.emplace_back(it.entry->key, payload);
    } else {
      throw Error("package refused: it holds an item it should not (" +
                  std::string(cache::level_name(it.level)) + " " + it.key_hex.substr(0, 16) +
                  "); a cache bundle is loaded with zc::cache::load_artifacts, not as a package");
    }
  }
  if (!manifest || !have_weights) {
    throw Error(std::string("not a zc package: the bundle holds no package ") +
                (manifest ? "weights" : "manifest") +
                " (a cache bundle is loaded with zc::cache::load_artifacts)");
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
      const std::string here = toolchain::make_target("native").native;
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
