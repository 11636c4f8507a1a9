// Building a package (include/zc/package.h): each example call captured once, its graph (or,
// under Regions::Auto, each distinct part of it) compiled through the process cache, and the
// graphs, the weights they read and the manifest written as one bundle (runtime/package_file.h).
#include <fstream>
#include <future>
#include <map>
#include <tuple>

#include "cache/bundle.h"
#include "cache/cache.h"
#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "ir/canonical.h"
#include "ir/verifier.h"
#include "runtime/artifact.h"
#include "runtime/compile_graph.h"
#include "runtime/compile_keys.h"
#include "runtime/package_file.h"
#include "runtime/regions.h"
#include "toolchain/target.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/package.h"
#include "zc/version.h"

namespace zc::package {

namespace {

using runtime::Backend;
using runtime::PackageBinding;
using runtime::PackageCall;

// A tensor's identity for sharing one weight between the graphs that read it: two handles of
// one parameter are one weight, stored once.
// By storage, not by data pointer: a GPU tensor's data has no host address.
using WeightId = std::tuple<const void*, int64_t, Shape, Shape, DType>;
WeightId weight_id(const Tensor& t) {
  return {t.unsafe_impl()->storage.get(), t.storage_offset(), t.shape(), t.strides(), t.dtype()};
}

// The encoded artifact of graph `g` (whose ir::graph_hash is `hash`) on `backend`: the graph
// level's entry when the process cache holds one, else lowered, generated and built through
// the lowering and kernel levels, and stored at the graph level as compile_graph would. Not
// through compile_graph: an executable made from a size template leaves no graph-level entry,
// and a package needs the graph's own binary.
std::vector<uint8_t> graph_artifact(const ir::Graph& g, const Digest& hash,
                                    const Backend& backend) {
  cache::Cache& store = cache::process_cache();
  const runtime::CompileKeys keys = runtime::compile_keys(hex(hash), backend);
  const cache::Key graph_key = keys.graph_key();
  if (auto e = store.get(graph_key)) {
    try {
      if (runtime::decode_artifact(e->payload).backend == backend.name()) return e->payload;
    } catch (const Error& err) {
      ZC_LOG(cache) << "graph " << hex(hash).substr(0, 16) << ": cached artifact unusable ("
                    << err.what() << "); building it for the package";
    }
  }
  Timer timer;
  ir::verify(g);
  std::vector<uint8_t> lowered = runtime::lowered_bytes(g, backend, &store, keys);
  codegen::CodegenResult code = codegen::codegen(ir::read_canonical(lowered), backend);
  double build_ms = 0;
  std::vector<uint8_t> binary = runtime::binary_for(keys, backend, &store, code.source, &build_ms);
  std::vector<uint8_t> bytes = runtime::encode_artifact(
      runtime::Artifact{std::string(backend.name()), std::move(lowered), std::move(binary)});
  store.put(graph_key, bytes, timer.ms());
  return bytes;
}

// The distinct graphs a specialization runs: the whole graph, or the distinct parts that
// plan_regions finds in it (what the loader finds again from the same graph).
std::vector<std::pair<Digest, const ir::Graph*>> distinct_graphs(const ir::Graph& g,
                                                                 const runtime::RegionPlan* plan) {
  if (!plan || plan->outlined_calls == 0) return {{ir::graph_hash(g), &g}};
  std::vector<std::pair<Digest, const ir::Graph*>> out;
  for (const runtime::GraphPart& gp : plan->parts) {
    bool seen = false;
    for (const auto& [h, _] : out) seen = seen || h == gp.hash;
    if (!seen) out.emplace_back(gp.hash, &gp.sub.graph);
  }
  return out;
}

void check_options(const CompileOptions& options) {
  if (!options.dynamic_dims.empty() || options.dynamic == Dynamic::All) {
    throw Error(
        "package: a package holds code for the shapes of its example calls only, and "
        "dynamic dims need a capture at each new size, which a package cannot do; pass one "
        "example call per size it must serve (and no dynamic_dims or Dynamic::All)");
  }
}

}  // namespace

std::vector<uint8_t> build(std::shared_ptr<nn::Module> module,
                           const std::vector<std::vector<Tensor>>& example_calls,
                           CompileOptions options) {
  if (!module) throw Error("package: the module is null");
  if (example_calls.empty()) {
    throw Error("package: no example calls; give the inputs of at least one forward call");
  }
  check_options(options);
  runtime::check_backend(options.backend);
  Timer timer;
  runtime::PackageContents contents;
  runtime::PackageManifest& m = contents.manifest;
  m.zc_version = zc::version();
  m.build_id = zc::build_id();
  m.bf16_products = options.matmul_precision == MatmulPrecision::Bf16;

  // Weights named as the module names them; lifted constants by number.
  std::map<WeightId, std::string> names;
  for (const auto& [name, t] : module->named_parameters()) names.emplace(weight_id(t), name);
  for (const auto& [name, t] : module->named_buffers()) names.emplace(weight_id(t), name);
  std::map<WeightId, std::string> stored;
  std::map<Digest, bool> have_graph;
  const Backend* backend = nullptr;

  for (size_t k = 0; k < example_calls.size(); ++k) {
    const std::vector<Tensor>& call = example_calls[k];
    if (call.empty()) throw Error("package: example call " + std::to_string(k) + " has no inputs");
    std::vector<Tensor> xs;
    PackageCall pc;
    for (size_t i = 0; i < call.size(); ++i) {
      if (!call[i].defined()) {
        throw Error("package: input " + std::to_string(i) + " of example call " +
                    std::to_string(k) + " is an undefined Tensor");
      }
      // Calls are made contiguous before they run: the code is made for contiguous inputs.
      xs.push_back(call[i].contiguous());
      pc.shapes.push_back(call[i].shape());
      pc.dtypes.push_back(call[i].dtype());
    }
    bool duplicate = false;
    for (const PackageCall& c : m.calls)
      duplicate = duplicate || (c.shapes == pc.shapes && c.dtypes == pc.dtypes);
    if (duplicate) continue;

    const Backend& b = runtime::resolve_backend(options.backend, xs[0].device());
    if (b.interprets()) {
      const Backend* native = codegen::backend_for(xs[0].device().type);
      throw Error("package: a package holds generated code, and " +
                  (native && !native->unavailable_reason().empty()
                       ? native->unavailable_reason()
                       : std::string("backend \"" + options.backend + "\" generates none")) +
                  "; build the package where the compiler is (loading it needs none)");
    }
    if (backend && backend != &b) {
      throw Error("package: example call " + std::to_string(k) + " runs on backend \"" +
                  std::string(b.name()) + "\" and an earlier one on \"" +
                  std::string(backend->name()) + "\"; a package runs on one device");
    }
    backend = &b;

    capture::Captured cap;
    try {
      cap = capture::capture_module(
          *module, xs,
          [](const ir::Graph&, std::span<const Tensor>) -> std::vector<Tensor> {
            throw Error("package: a graph break");  // fullgraph raises before a segment runs
          },
          /*fullgraph=*/true);
    } catch (const Error& e) {
      std::string what = e.what();
      if (what.starts_with("fullgraph=true: ")) what = what.substr(16);
      // fullgraph's advice (allow graph breaks) does not apply: a package cannot re-trace.
      if (what.find("graph break") != std::string::npos) {
        throw Error("package: " + what.substr(0, what.find(';')) +
                    "; a package holds whole graphs (its loader cannot run forward()): remove "
                    "the read of a tensor's value from forward() to package it");
      }
      throw;
    }
    // The graph as the loader will read it, so that both plan the same regions.
    pc.graph = ir::canonical_bytes(cap.graph);
    ir::Graph g = ir::read_canonical(pc.graph);
    for (const capture::InputBinding& bind : cap.bindings) {
      PackageBinding pb;
      if (bind.kind == ir::InputKind::user) {
        pb.user = true;
        pb.input = bind.user;
      } else {
        const WeightId id = weight_id(bind.tensor);
        auto s = stored.find(id);
        if (s == stored.end()) {
          auto n = names.find(id);
          std::string name =
              n != names.end() ? n->second : "constant." + std::to_string(contents.weights.size());
          contents.weights.emplace_back(name, bind.tensor);
          s = stored.emplace(id, name).first;
        }
        pb.weight = s->second;
      }
      pc.bindings.push_back(std::move(pb));
    }
    pc.hierarchical = options.regions == Regions::Auto;
    std::optional<runtime::RegionPlan> plan;
    if (pc.hierarchical) plan = runtime::plan_regions(g, runtime::RegionRule{});
    // Distinct graphs build side by side, each its own compiler process.
    std::vector<std::pair<Digest, std::future<std::vector<uint8_t>>>> builds;
    for (const auto& [hash, part] : distinct_graphs(g, plan ? &*plan : nullptr)) {
      if (have_graph[hash]) continue;
      have_graph[hash] = true;
      builds.emplace_back(hash, std::async(std::launch::async, [part = part, hash = hash, &b] {
                            return graph_artifact(*part, hash, b);
                          }));
    }
    for (auto& [hash, f] : builds) contents.graphs.emplace_back(hash, f.get());
    m.calls.push_back(std::move(pc));
  }

  m.backend = std::string(backend->name());
  m.target = backend->key_parts().target;
  m.replay = options.cuda_graphs && backend->device() != Device::Type::cpu;
  if (backend->device() == Device::Type::cpu) {
    const toolchain::Target& t = toolchain::cpu_target();
    m.isa = t.isa;
    m.native = t.native;
  }
  const cache::CacheConfig& config = cache::process_cache().config();
  const std::vector<uint8_t> key = config.hmac_key_file.empty()
                                       ? std::vector<uint8_t>{}
                                       : cache::read_hmac_key_file(config.hmac_key_file);
  std::vector<uint8_t> bytes = runtime::write_package(contents, key);
  ZC_LOG(timing) << "package of " << m.calls.size() << " call(s), " << contents.graphs.size()
                 << " graph(s), " << contents.weights.size() << " weight(s): " << bytes.size()
                 << " bytes in " << timer.ms() << " ms";
  return bytes;
}

void save(std::shared_ptr<nn::Module> module, const std::vector<std::vector<Tensor>>& example_calls,
          const std::string& path, CompileOptions options) {
  const std::vector<uint8_t> bytes = build(std::move(module), example_calls, std::move(options));
  // Written beside the target and renamed, so a reader never sees half a package.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("package: cannot write " + tmp);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw Error("package: writing " + tmp + " failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("package: cannot rename " + tmp + " to " + path);
  }
}

}  // namespace zc::package
