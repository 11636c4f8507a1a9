// Building a package (include/zc/package.h): each example call captured once, its graph (or,
// under Regions::Auto, each distinct part of it) compiled through the process cache, and the
// graphs, the weights they read and the manifest written as one bundle (runtime/package/file.h).
//
// With dynamic dims, each example call is captured at every size of their ranges instead, and
// the size templates of its graphs (or parts) are made as a compiled module makes them; each
// distinct graph is checked against its template here, as the loader will check it, and the
// few a template does not serve are compiled for their own size.
#include <algorithm>
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
#include "runtime/driver/artifact.h"
#include "runtime/driver/backend_layout.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/dynamic/dims.h"
#include "runtime/dynamic/templates.h"
#include "runtime/package/file.h"
#include "runtime/regions/plan.h"
#include "toolchain/target.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/factories.h"
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

constexpr int64_t kMaxSizes = 4096;
// Graphs a range's templates do not serve (small sizes whose code takes other paths) are
// compiled for their own size, up to this many; more means the range is not one family.
constexpr size_t kMaxOwnBuilds = 16;

void check_options(const CompileOptions& options) {
  if (options.matmul_precision == MatmulPrecision::Tf32) {
    throw Error(
        "package: MatmulPrecision::Tf32 is not recorded in a package (its manifest records bf16 "
        "products only); build it with Highest or Bf16, or compile the model instead");
  }
  if (options.dynamic == Dynamic::All) {
    throw Error(
        "package: Dynamic::All makes every dim dynamic with no bound, and a package holds a "
        "captured graph per size it serves; pass dynamic_dims with a bounded range per dim "
        "instead ({input, dim, min, max})");
  }
}

// The ranges of `options.dynamic_dims` on example call `k`, checked.
std::vector<runtime::PackageRange> ranges_of(const CompileOptions& options,
                                             const std::vector<Tensor>& call, size_t k) {
  std::vector<runtime::PackageRange> out;
  int64_t sizes = 1;
  for (const DynamicDim& d : options.dynamic_dims) {
    const std::string which =
        "dynamic dim {input " + std::to_string(d.input) + ", dim " + std::to_string(d.dim) + "}";
    if (d.input >= call.size() || d.dim < 0 ||
        static_cast<size_t>(d.dim) >= call[d.input].shape().size()) {
      throw Error("package: " + which + " names no dim of example call " + std::to_string(k) +
                  " (" + std::to_string(call.size()) + " input(s)); mark a dim its inputs have");
    }
    if (d.max == INT64_MAX) {
      throw Error("package: " + which +
                  " has no max; a package holds a captured graph per size it serves, so give "
                  "the largest size it must serve (DynamicDim::max, zc package --dynamic-dim "
                  "INPUT:DIM:MIN:MAX)");
    }
    if (d.min < 1 || d.max < d.min) {
      throw Error("package: " + which + " has the range [" + std::to_string(d.min) + ", " +
                  std::to_string(d.max) + "]; give 1 <= min <= max");
    }
    sizes *= d.max - d.min + 1;
    if (sizes > kMaxSizes) {
      throw Error("package: the dynamic dims' ranges make more than " + std::to_string(kMaxSizes) +
                  " sizes, each captured and stored; narrow them (or build several packages)");
    }
    for (const runtime::PackageRange& r : out) {
      if (r.input == d.input && r.dim == d.dim) throw Error("package: " + which + " given twice");
    }
    out.push_back({d.input, d.dim, d.min, d.max});
  }
  return out;
}

}  // namespace

namespace {

// What the example calls add to a package, and what is stored so far.
struct Builder {
  nn::Module& module;
  const CompileOptions& options;
  runtime::PackageContents contents;
  // Weights named as the module names them; lifted constants by number.
  std::map<WeightId, std::string> names, stored;
  std::map<Digest, bool> have_graph;
  std::map<Digest, size_t> have_template;  // structure hash -> contents.templates
  const Backend* backend = nullptr;
  // The build's one compile: every graph and template goes through its cache and counts into
  // its report (the builds of distinct graphs side by side share it).
  runtime::CompileContext ctx;

  struct Capture {
    capture::Captured cap;
    std::vector<uint8_t> graph;  // as the loader will read it, so that both plan the same regions
    std::vector<PackageBinding> bindings;
  };
  Capture capture_call(const std::vector<Tensor>& xs);
  void add_graphs(const ir::Graph& g, const Backend& b);
  void add_ranged(const std::vector<Tensor>& xs, size_t k, PackageCall& pc, const Backend& b);
};

Builder::Capture Builder::capture_call(const std::vector<Tensor>& xs) {
  Capture c;
  try {
    c.cap = capture::capture_module(
        module, xs,
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
  if (!c.cap.writes.empty()) {
    throw Error(
        "package: forward() updates a buffer in place (index_copy_: a KV cache); a "
        "package does not hold such updates yet: compile the module instead");
  }
  if (backend) c.cap.graph = runtime::in_backend_layout(std::move(c.cap.graph), *backend);
  c.graph = ir::canonical_bytes(c.cap.graph);
  for (const capture::InputBinding& bind : c.cap.bindings) {
    PackageBinding pb;
    if (bind.kind == ir::InputKind::seed) {
      throw Error(
          "package: forward() draws random numbers (zc::rand_like or randn_like; "
          "nn::Dropout in training mode), and a package serves inference: call eval() on the "
          "module before packaging it");
    }
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
    c.bindings.push_back(std::move(pb));
  }
  return c;
}

// The compiled graphs of `g` (read back from canonical bytes) for its own sizes.
void Builder::add_graphs(const ir::Graph& g, const Backend& b) {
  std::optional<runtime::RegionPlan> plan;
  if (options.regions == Regions::Auto) plan = runtime::plan_regions(g, runtime::RegionRule{});
  // Distinct graphs build side by side, each its own compiler process.
  std::vector<std::pair<Digest, std::future<std::vector<uint8_t>>>> builds;
  for (const auto& [hash, part] : distinct_graphs(g, plan ? &*plan : nullptr)) {
    if (have_graph[hash]) continue;
    have_graph[hash] = true;
    builds.emplace_back(hash, std::async(std::launch::async, [part = part, hash = hash, &b, this] {
                          return runtime::graph_artifact(*part, hash, b, ctx);
                        }));
  }
  for (auto& [hash, f] : builds) contents.graphs.emplace_back(hash, f.get());
}

// Example call `k` (`xs`) captured at every size of its ranges, its templates made and each
// distinct graph checked against them (or compiled for its own size).
void Builder::add_ranged(const std::vector<Tensor>& xs, size_t k, PackageCall& pc,
                         const Backend& b) {
  pc.ranges = ranges_of(options, xs, k);
  // The example's sizes, each ranged one brought into its range: the sizes its templates are
  // made around.
  std::vector<Shape> anchor = pc.shapes;
  for (const runtime::PackageRange& r : pc.ranges) {
    int64_t& d = anchor[r.input][static_cast<size_t>(r.dim)];
    d = std::clamp(d, r.min, r.max);
  }
  pc.shapes = anchor;
  std::map<Digest, uint64_t> graph_index;
  std::vector<int64_t> at;
  for (const runtime::PackageRange& r : pc.ranges) at.push_back(r.min);
  // Inputs at `at`, the other dims the example's. Token ids of zeros are valid inputs, and a
  // graph without breaks does not depend on the values.
  auto probes_at = [&](const std::vector<int64_t>& sizes) {
    std::vector<Tensor> probes;
    for (size_t i = 0; i < xs.size(); ++i) {
      Shape s = anchor[i];
      for (size_t j = 0; j < pc.ranges.size(); ++j) {
        if (pc.ranges[j].input == i) s[static_cast<size_t>(pc.ranges[j].dim)] = sizes[j];
      }
      probes.push_back(zeros(s, xs[i].dtype(), xs[i].device()));
    }
    return probes;
  };
  for (bool more = true; more;) {
    const std::vector<Tensor> probes = probes_at(at);
    bool is_anchor = true;
    for (size_t i = 0; i < xs.size(); ++i) is_anchor = is_anchor && probes[i].shape() == anchor[i];
    Capture c;
    try {
      c = capture_call(probes);
    } catch (const Error& e) {
      // Every combination of the ranges' sizes is captured: dims the model needs equal (two
      // inputs' batch) cannot be two ranges.
      std::string sizes;
      for (size_t j = 0; j < at.size(); ++j) {
        sizes += (j ? ", " : "") + std::string("input ") + std::to_string(pc.ranges[j].input) +
                 " dim " + std::to_string(pc.ranges[j].dim) + " = " + std::to_string(at[j]);
      }
      throw Error("package: example call " + std::to_string(k) + " at " + sizes +
                  " of its ranges: " + e.what() +
                  "; a package serves every combination of its ranges' sizes, so dims the model "
                  "needs equal cannot both be ranged (range one, or build a package per size)");
    }
    runtime::PackageSize size{at, 0, 0};
    auto [g, fresh] = graph_index.emplace(sha256(c.graph), pc.size_graphs.size());
    if (fresh) pc.size_graphs.push_back(c.graph);
    size.graph = g->second;
    auto list = std::find(pc.size_bindings.begin(), pc.size_bindings.end(), c.bindings);
    size.bindings = static_cast<uint64_t>(list - pc.size_bindings.begin());
    if (list == pc.size_bindings.end()) pc.size_bindings.push_back(c.bindings);
    if (is_anchor) {
      pc.graph = c.graph;
      pc.bindings = c.bindings;
    }
    pc.sizes.push_back(std::move(size));
    more = false;  // the next size, the last range fastest
    for (size_t j = pc.ranges.size(); j-- > 0;) {
      if (++at[j] <= pc.ranges[j].max) {
        more = true;
        break;
      }
      at[j] = pc.ranges[j].min;
    }
  }
  ZC_CHECK(!pc.graph.empty());
  // The templates, made around the example's sizes; where the code changes there (a size
  // whose lowering differs, as at a power of two), around the middle of the ranges too.
  std::vector<runtime::DynamicRange> dims;
  std::vector<int64_t> example, middle;
  for (const runtime::PackageRange& r : pc.ranges) {
    dims.push_back({r.input, r.dim, r.min, r.max});
    example.push_back(anchor[r.input][static_cast<size_t>(r.dim)]);
    middle.push_back(r.min + (r.max - r.min) / 2);
  }
  for (const std::vector<int64_t>& sizes : {example, middle}) {
    if (!b.serves_many_sizes()) break;
    const std::vector<Tensor> probes = probes_at(sizes);
    Capture c = capture_call(probes);
    if (runtime::compile_for_all_sizes(module, probes, dims, c.cap.graph, b, pc.hierarchical, ctx))
      break;
  }
  // Each distinct graph: served by a template (checked as the loader will), else compiled.
  std::vector<std::pair<Digest, ir::Graph>> own;
  std::map<Digest, bool> checked;
  for (const std::vector<uint8_t>& bytes : pc.size_graphs) {
    ir::Graph g = ir::read_canonical(bytes);
    std::optional<runtime::RegionPlan> plan;
    if (pc.hierarchical) plan = runtime::plan_regions(g, runtime::RegionRule{});
    for (const auto& [hash, part] : distinct_graphs(g, plan ? &*plan : nullptr)) {
      if (have_graph[hash] || checked[hash]) continue;
      checked[hash] = true;
      const runtime::CompileKeys keys = runtime::compile_keys(hex(hash), b);
      const ir::Graph lowered = ir::read_canonical(runtime::lowered_bytes(*part, b, ctx, keys));
      const Digest structure = ir::structure_hash(lowered);
      bool served = false;
      if (auto t = have_template.find(structure); t != have_template.end()) {
        const runtime::PackageTemplate& pt = contents.templates[t->second].second;
        served = runtime::bind_size_template(lowered, b, pt.record, pt.binary) != nullptr;
      } else if (auto st = runtime::stored_size_template(lowered, ctx, keys)) {
        served = runtime::bind_size_template(lowered, b, st->record, st->binary) != nullptr;
        if (served) {
          have_template[structure] = contents.templates.size();
          contents.templates.emplace_back(
              structure, runtime::PackageTemplate{std::move(st->record), std::move(st->binary)});
        }
      }
      if (!served) own.emplace_back(hash, *part);
    }
  }
  if (own.size() > kMaxOwnBuilds) {
    throw Error("package: " + std::to_string(own.size()) + " graphs of example call " +
                std::to_string(k) +
                " over its dynamic dims' ranges need code of their own (its code takes other "
                "paths at many sizes: ZC_LOGS=recompiles says why); narrow the ranges, or pass "
                "one example call per size instead of dynamic_dims");
  }
  std::vector<std::pair<Digest, std::future<std::vector<uint8_t>>>> builds;
  for (const auto& [hash, g] : own) {
    have_graph[hash] = true;
    builds.emplace_back(hash, std::async(std::launch::async, [&g = g, hash = hash, &b, this] {
                          return runtime::graph_artifact(g, hash, b, ctx);
                        }));
  }
  for (auto& [hash, f] : builds) contents.graphs.emplace_back(hash, f.get());
  ZC_LOG(timing) << "package call " << k << ": " << pc.sizes.size() << " sizes, "
                 << pc.size_graphs.size() << " distinct graphs, " << own.size()
                 << " compiled for their own size, " << contents.templates.size()
                 << " size template(s) in the package";
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
  Builder builder{*module, options};
  runtime::PackageContents& contents = builder.contents;
  runtime::PackageManifest& m = contents.manifest;
  m.zc_version = zc::version();
  m.build_id = zc::build_id();
  m.bf16_products = options.matmul_precision == MatmulPrecision::Bf16;

  for (const auto& [name, t] : module->named_parameters())
    builder.names.emplace(weight_id(t), name);
  for (const auto& [name, t] : module->named_buffers()) builder.names.emplace(weight_id(t), name);
  const Backend*& backend = builder.backend;

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
    // With dynamic dims, calls that differ only in them serve the same sizes.
    auto masked = [&](std::vector<Shape> shapes) {
      for (const DynamicDim& d : options.dynamic_dims) {
        if (d.input < shapes.size() && d.dim >= 0 &&
            static_cast<size_t>(d.dim) < shapes[d.input].size())
          shapes[d.input][static_cast<size_t>(d.dim)] = -1;
      }
      return shapes;
    };
    bool duplicate = false;
    for (const PackageCall& c : m.calls)
      duplicate = duplicate || (masked(c.shapes) == masked(pc.shapes) && c.dtypes == pc.dtypes);
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
    pc.hierarchical = options.regions == Regions::Auto;
    if (!options.dynamic_dims.empty()) {
      builder.add_ranged(xs, k, pc, b);
    } else {
      Builder::Capture c = builder.capture_call(xs);
      pc.graph = std::move(c.graph);
      pc.bindings = std::move(c.bindings);
      builder.add_graphs(ir::read_canonical(pc.graph), b);
    }
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
                 << " graph(s), " << contents.templates.size() << " size template(s), "
                 << contents.weights.size() << " weight(s): " << bytes.size() << " bytes in "
                 << timer.ms() << " ms; " << builder.ctx.report().str();
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
