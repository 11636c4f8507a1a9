// Loading and calling a package (include/zc/package.h): the file verified, its target judged,
// each compiled graph loaded from its artifact by the backend (schedule, plan, binary: no
// compiler), each specialization's executable assembled as the builder's compile would have
// (the regions planned again from the same graph), and its weights bound. Nothing is captured
// and no cache is read or written.
//
// A call that serves ranges of sizes is bound per size on its first call of that size: the
// size's stored graph lowered (pure), each of its graphs (or parts) the package lacks code of
// its own for checked against the size template of its structure and bound to its binary.
// A size that fails the check is refused, never compiled.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "cache/bundle.h"
#include "cache/cache.h"
#include "capture/guards.h"
#include "codegen/backend.h"
#include "ir/canonical.h"
#include "runtime/call/specialization.h"
#include "runtime/driver/artifact.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/dynamic/templates.h"
#include "runtime/package/file.h"
#include "runtime/products/bf16_products.h"
#include "runtime/regions/compile.h"
#include "runtime/regions/plan.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/package.h"

namespace zc::package {

namespace {

using runtime::Specialization;

std::string dtype_str(DType d) {
  return std::string(dtype_name(d));
}

// A call that serves ranges of sizes: what binds a size. Each size bound is added to the
// package's table as a specialization of its own.
struct Ranged {
  runtime::PackageCall call;  // its ranges, sizes, graphs and binding lists
  std::map<std::vector<int64_t>, size_t> size_index;
  mutable std::mutex mu;  // one size bound at a time
};

}  // namespace

struct Package::State {
  runtime::PackageManifest manifest;  // its calls' graph bytes dropped once loaded
  std::vector<CallSignature> calls, outputs;
  std::vector<std::unique_ptr<Ranged>> ranged;  // per call: null for one of fixed shapes
  const codegen::Backend* backend = nullptr;
  std::map<Digest, std::shared_ptr<const codegen::Executable>> execs;
  std::map<Digest, runtime::PackageTemplate> templates;  // by structure hash
  std::map<std::string, Tensor> weights;
  Device device;
  size_t graphs = 0, weights_count = 0;
  int64_t weight_bytes = 0;
  // Every call's specialization, looked up as any compiled code is: the fixed calls', the
  // ranged calls' (matched by their ranges, then bound per size) and each size bound so far.
  mutable std::mutex mu;  // guards `table`
  mutable runtime::SpecializationTable table;
  std::map<const Specialization*, size_t> ranged_call;  // a ranged call's specialization: its call
};

std::string CallSignature::str() const {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::string dims;
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      std::string dim = std::to_string(shapes[i][d]);
      for (const DynamicDim& r : ranges) {
        if (r.input == i && static_cast<size_t>(r.dim) == d)
          dim = std::to_string(r.min) + ".." + std::to_string(r.max);
      }
      dims += (d ? "," : "") + dim;
    }
    s += (i ? ", " : "") + ("[" + dims + "]") + " " + dtype_str(dtypes[i]);
  }
  return s;
}

namespace {

std::string serves(const std::vector<CallSignature>& calls) {
  std::string s;
  for (size_t i = 0; i < calls.size(); ++i) s += (i ? "; " : "") + calls[i].str();
  return s;
}

// The guards of a call of `shapes` and `dtypes` on the package's device: dense inputs (a call
// makes its strided ones contiguous before the lookup).
std::vector<capture::InputGuard> guards_of(const Package::State& s,
                                           const std::vector<Shape>& shapes,
                                           const std::vector<DType>& dtypes) {
  std::vector<capture::InputGuard> guards;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor probe = Tensor::view_of(Storage::borrow(nullptr, 0, s.device), shapes[i],
                                   contiguous_strides(shapes[i]), 0, dtypes[i]);
    guards.push_back(capture::input_guard(probe));
  }
  return guards;
}

// The specialization of `g` (read back from canonical bytes) with `bindings`: each graph (or
// part) from `part_exec`, the weights bound.
std::shared_ptr<Specialization> assemble(
    const Package::State& s, ir::Graph g, bool hierarchical,
    const std::vector<runtime::PackageBinding>& bindings,
    const std::function<std::shared_ptr<const codegen::Executable>(const Digest&,
                                                                   const ir::Graph&)>& part_exec) {
  if (bindings.size() != g.inputs.size()) {
    throw Error("package is inconsistent: a graph of " + std::to_string(g.inputs.size()) +
                " inputs has " + std::to_string(bindings.size()) + " bindings");
  }
  auto spec = std::make_shared<Specialization>();
  std::optional<runtime::RegionPlan> plan;
  if (hierarchical) plan = runtime::plan_regions(g, runtime::RegionRule{});
  std::shared_ptr<const codegen::Executable> exec;
  if (plan && plan->outlined_calls > 0) {
    exec = runtime::plan_executable(
        g, *plan, [&](const runtime::GraphPart& gp) { return part_exec(gp.hash, gp.sub.graph); });
  } else {
    exec = part_exec(ir::graph_hash(g), g);
  }
  if (s.manifest.bf16_products) exec = runtime::with_bf16_products(std::move(exec));
  std::vector<bool> per_call;
  for (size_t i = 0; i < bindings.size(); ++i) {
    const runtime::PackageBinding& b = bindings[i];
    per_call.push_back(b.user);
    if (b.user) {
      spec->bound.emplace_back();
      spec->user_slots.push_back({i, static_cast<size_t>(b.input)});
      continue;
    }
    auto w = s.weights.find(b.weight);
    if (w == s.weights.end()) {
      throw Error("package is inconsistent: it lacks weight " + b.weight + "; build it again");
    }
    spec->bound.push_back(w->second);
  }
  if (s.manifest.replay) exec = s.backend->replayable(std::move(exec), per_call);
  spec->code = runtime::GraphVariants::made(std::move(g), *s.backend, std::move(exec));
  return spec;
}

std::shared_ptr<const codegen::Executable> exec_of(const Package::State& s, const Digest& h) {
  auto it = s.execs.find(h);
  if (it == s.execs.end()) {
    throw Error("package is inconsistent: it lacks graph " + hex(h).substr(0, 16) +
                ", which its manifest runs; build it again");
  }
  return it->second;
}

CallSignature signature_of(std::span<const Tensor> xs) {
  CallSignature got;
  for (const Tensor& x : xs) {
    got.shapes.push_back(x.shape());
    got.dtypes.push_back(x.dtype());
  }
  return got;
}

// Ranged call `k` bound at the sizes of `xs` (which its ranges hold): a specialization of those
// sizes, added to the package's table.
std::shared_ptr<const Specialization> bind_size(const Package::State& s, size_t k,
                                                std::span<const Tensor> xs) {
  const Ranged& r = *s.ranged[k];
  std::lock_guard<std::mutex> lock(r.mu);
  {
    // Bound by another call meanwhile.
    std::lock_guard table_lock(s.mu);
    if (auto found = s.table.find(xs); found && found->ranges.empty()) return found;
  }
  std::vector<int64_t> at;
  for (const runtime::PackageRange& range : r.call.ranges) {
    at.push_back(xs[range.input].shape()[static_cast<size_t>(range.dim)]);
  }
  const CallSignature got = signature_of(xs);
  auto index = r.size_index.find(at);
  if (index == r.size_index.end()) {
    throw Error("package is inconsistent: it lacks inputs " + got.str() +
                ", which its ranges hold; build it again");
  }
  Timer timer;
  const runtime::PackageSize& size = r.call.sizes[index->second];
  ir::Graph g = ir::read_canonical(r.call.size_graphs[size.graph]);
  // A repeated block is bound once per size, as the builder stored it once.
  std::map<Digest, std::shared_ptr<const codegen::Executable>> done;
  auto part_exec = [&](const Digest& hash, const ir::Graph& part) {
    if (s.execs.count(hash)) return exec_of(s, hash);
    if (auto d = done.find(hash); d != done.end()) return d->second;
    // Lowering is pure: no keys or cache are needed without a store, and a package reads none.
    runtime::CompileContext no_cache(nullptr);
    const ir::Graph lowered =
        ir::read_canonical(runtime::lowered_bytes(part, *s.backend, no_cache, {}));
    auto t = s.templates.find(ir::structure_hash(lowered));
    std::string why = "the package holds no size template of its structure";
    std::shared_ptr<const codegen::Executable> exec;
    if (t != s.templates.end()) {
      exec = runtime::bind_size_template(lowered, *s.backend, t->second.record, t->second.binary,
                                         &why);
    }
    if (!exec) {
      throw Error("package: inputs " + got.str() + " are in the range it serves (" +
                  s.calls[k].str() + "), and its graph " + hex(hash).substr(0, 16) +
                  " at these sizes has no code in the package (" + why +
                  "); a package runs no unchecked code and compiles nothing: build it again "
                  "with this zc, whose build checks every size of the range");
    }
    done.emplace(hash, exec);
    return exec;
  };
  std::shared_ptr<Specialization> spec = assemble(s, std::move(g), r.call.hierarchical,
                                                  r.call.size_bindings[size.bindings], part_exec);
  for (const Tensor& x : xs) spec->guards.push_back(capture::input_guard(x));
  {
    std::lock_guard table_lock(s.mu);
    s.table.add(spec);
  }
  ZC_LOG(timing) << "package: inputs " << got.str() << " bound from " << done.size()
                 << " size template(s) in " << timer.ms() << " ms";
  return spec;
}

// Why no specialization serves `xs`: what the ranged calls whose other dims match say of the
// sizes outside their ranges, then what the package serves.
Error no_match(const Package::State& s, std::span<const Tensor> xs) {
  const CallSignature got = signature_of(xs);
  std::string outside;
  for (const CallSignature& c : s.calls) {
    if (c.shapes.size() != xs.size() || c.ranges.empty()) continue;
    bool ok = true;
    for (size_t i = 0; i < xs.size() && ok; ++i) {
      ok = xs[i].dtype() == c.dtypes[i] && xs[i].shape().size() == c.shapes[i].size();
      for (size_t d = 0; d < c.shapes[i].size() && ok; ++d) {
        bool ranged = false;
        for (const DynamicDim& r : c.ranges)
          ranged = ranged || (r.input == i && r.dim == static_cast<int64_t>(d));
        ok = ranged || xs[i].shape()[d] == c.shapes[i][d];
      }
    }
    if (!ok) continue;
    for (const DynamicDim& r : c.ranges) {
      const int64_t v = xs[r.input].shape()[static_cast<size_t>(r.dim)];
      if (v < r.min || v > r.max) {
        outside += "; input " + std::to_string(r.input) + " dim " + std::to_string(r.dim) + " is " +
                   std::to_string(v) + ", and " + c.str() + " takes " + std::to_string(r.min) +
                   ".." + std::to_string(r.max) + " there";
      }
    }
  }
  return Error("package: inputs " + got.str() + " match none of its specializations" + outside +
               "; it serves " + serves(s.calls) +
               " (build it with an example call of these shapes, or dynamic_dims ranges that "
               "hold them, to serve them)");
}

std::vector<Tensor> run(const Package::State& s, std::span<const Tensor> given) {
  for (size_t i = 0; i < given.size(); ++i) {
    if (!given[i].defined()) {
      throw Error("package: input " + std::to_string(i) + " is an undefined Tensor");
    }
    if (given[i].device() != s.device) {
      throw Error("package: input " + std::to_string(i) + " is on " + given[i].device().str() +
                  " and the package runs on " + s.device.str() + "; move it with .to()");
    }
  }
  // The code is made for contiguous inputs: strided ones are copied for the call.
  std::vector<Tensor> dense;
  dense.reserve(given.size());
  for (const Tensor& x : given) dense.push_back(x.is_contiguous() ? x : x.contiguous());
  std::shared_ptr<const Specialization> spec;
  {
    std::lock_guard lock(s.mu);
    spec = s.table.find(dense);
  }
  if (!spec) throw no_match(s, dense);
  if (!spec->ranges.empty()) spec = bind_size(s, s.ranged_call.at(spec.get()), dense);
  return runtime::run_inference(*spec, *spec->code->inference_if_compiled(), dense);
}

// The file mapped read-only: verifying and copying out of the page cache directly saves
// reading it into a buffer first (a quarter of gpt-small's load).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("package: cannot open " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error("package: cannot read " + path + " (is it a regular file?)");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (data_ == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw Error("package: cannot map " + path + ": " + std::strerror(err));
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (size_ > 0) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

Package load(std::span<const uint8_t> bytes) {
  Timer timer;
  // The signing key as the caches are configured, without starting the process cache: a
  // package reads and writes no cache.
  const std::string key_file = cache::CacheConfig::from_env().hmac_key_file;
  const std::vector<uint8_t> key =
      key_file.empty() ? std::vector<uint8_t>{} : cache::read_hmac_key_file(key_file);
  runtime::PackageContents contents = runtime::read_package(bytes, key);
  auto state = std::make_shared<Package::State>();
  runtime::PackageManifest& m = contents.manifest;
  if (std::string why = runtime::package_refusal(m); !why.empty()) {
    throw Error("package refused: " + why);
  }
  const codegen::Backend& backend = *codegen::find_backend(m.backend);
  state->backend = &backend;
  state->device = backend.device() == Device::Type::cpu ? Device::cpu() : Device::cuda(0);
  const double verify_ms = timer.ms();

  for (auto& [name, t] : contents.weights) {
    state->weight_bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    state->weights[name] = state->device.is_cpu() ? std::move(t) : t.to(state->device);
  }
  state->weights_count = state->weights.size();
  for (const auto& [hash, artifact] : contents.graphs) {
    try {
      state->execs[hash] = runtime::load_artifact(runtime::decode_artifact(artifact), backend);
    } catch (const Error& e) {
      throw Error("package: graph " + hex(hash).substr(0, 16) + " does not load here: " + e.what());
    }
  }
  for (auto& [structure, t] : contents.templates) state->templates[structure] = std::move(t);
  state->graphs = state->execs.size() + state->templates.size();
  const double graphs_ms = timer.ms();
  // assemble() reads the manifest's flags from the state.
  state->manifest.bf16_products = m.bf16_products;
  state->manifest.replay = m.replay;

  for (runtime::PackageCall& c : m.calls) {
    ir::Graph g = ir::read_canonical(c.graph);
    CallSignature sig{c.shapes, c.dtypes, {}};
    CallSignature out;
    for (ir::ValueId v : g.outputs) {
      out.shapes.push_back(g.meta(v).shape);
      out.dtypes.push_back(g.meta(v).dtype);
    }
    std::shared_ptr<Specialization> spec;
    if (c.ranges.empty()) {
      spec = assemble(*state, std::move(g), c.hierarchical, c.bindings,
                      [&](const Digest& h, const ir::Graph&) { return exec_of(*state, h); });
      state->ranged.emplace_back();
    } else {
      // Matched by its ranges, its code bound per size at the first call of that size.
      spec = std::make_shared<Specialization>();
      for (const runtime::PackageRange& r : c.ranges) {
        sig.ranges.push_back(DynamicDim{static_cast<size_t>(r.input), r.dim, r.min, r.max});
        spec->ranges.push_back({static_cast<size_t>(r.input), r.dim, r.min, r.max});
      }
      auto ranged = std::make_unique<Ranged>();
      for (size_t i = 0; i < c.sizes.size(); ++i) ranged->size_index[c.sizes[i].at] = i;
      ranged->call = std::move(c);
      state->ranged_call[spec.get()] = state->ranged.size();
      state->ranged.push_back(std::move(ranged));
    }
    spec->guards = guards_of(*state, sig.shapes, sig.dtypes);
    state->table.add(spec);
    state->calls.push_back(std::move(sig));
    state->outputs.push_back(std::move(out));
    c.graph = {};
  }
  state->manifest = std::move(m);
  ZC_LOG(timing) << "package of " << bytes.size() << " bytes loaded in " << timer.ms()
                 << " ms (verified and decoded " << verify_ms << " ms, weights and graphs "
                 << graphs_ms - verify_ms << " ms): " << state->calls.size()
                 << " specialization(s), " << state->graphs << " graph(s), " << state->weights_count
                 << " weight(s)";
  return Package(std::move(state));
}

Package load(const std::string& path) {
  const MappedFile file(path);
  try {
    return load(file.bytes());
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

Tensor Package::operator()(const Tensor& x) const {
  if (!state_) throw Error("package: called before load()");
  std::vector<Tensor> out = run(*state_, std::span<const Tensor>(&x, 1));
  if (out.size() != 1) {
    throw Error("package: its forward returns " + std::to_string(out.size()) +
                " tensors; call it with a std::vector<Tensor> to receive them all");
  }
  return std::move(out[0]);
}

std::vector<Tensor> Package::operator()(const std::vector<Tensor>& inputs) const {
  if (!state_) throw Error("package: called before load()");
  return run(*state_, inputs);
}

const std::vector<CallSignature>& Package::calls() const {
  static const std::vector<CallSignature> none;
  return state_ ? state_->calls : none;
}

const std::vector<CallSignature>& Package::outputs() const {
  static const std::vector<CallSignature> none;
  return state_ ? state_->outputs : none;
}

Device Package::device() const {
  return state_ ? state_->device : Device::cpu();
}

std::string Package::backend() const {
  return state_ ? state_->manifest.backend : "";
}

std::string Package::describe() const {
  if (!state_) return "empty package (not loaded)\n";
  const runtime::PackageManifest& m = state_->manifest;
  std::ostringstream os;
  os << "zc " << m.zc_version << " build " << m.build_id << "\n";
  os << "backend " << m.backend << ", target " << (m.isa.empty() ? m.target : m.isa) << "\n";
  os << state_->graphs << " compiled graph(s), " << state_->weights_count << " weight(s) of "
     << state_->weight_bytes << " bytes\n";
  for (size_t k = 0; k < state_->calls.size(); ++k) {
    os << "serves " << state_->calls[k].str() << " -> " << state_->outputs[k].str() << "\n";
  }
  return os.str();
}

}  // namespace zc::package
