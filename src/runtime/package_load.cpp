// Loading and calling a package (include/zc/package.h): the file verified, its target judged,
// each compiled graph loaded from its artifact by the backend (schedule, plan, binary: no
// compiler), each specialization's executable assembled as the builder's compile would have
// (the regions planned again from the same graph), and its weights bound. Nothing is captured
// and no cache is read or written.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "cache/bundle.h"
#include "cache/cache.h"
#include "codegen/backend.h"
#include "ir/canonical.h"
#include "runtime/artifact.h"
#include "runtime/bf16_products.h"
#include "runtime/hierarchical.h"
#include "runtime/package_file.h"
#include "runtime/regions.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/package.h"

namespace zc::package {

namespace {

struct Specialization {
  std::shared_ptr<const codegen::Executable> exec;
  std::vector<Tensor> bound;  // graph inputs; the user slots are left undefined
  std::vector<std::pair<size_t, size_t>> user_slots;  // (graph input, call input)
};

std::string dtype_str(DType d) {
  return std::string(dtype_name(d));
}

}  // namespace

struct Package::State {
  runtime::PackageManifest manifest;  // its calls' graph bytes dropped once loaded
  std::vector<CallSignature> calls, outputs;
  std::vector<Specialization> specs;
  Device device;
  size_t graphs = 0, weights = 0;
  int64_t weight_bytes = 0;
};

std::string CallSignature::str() const {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) {
    s += (i ? ", " : "") + shape_str(shapes[i]) + " " + dtype_str(dtypes[i]);
  }
  return s;
}

namespace {

std::string serves(const std::vector<CallSignature>& calls) {
  std::string s;
  for (size_t i = 0; i < calls.size(); ++i) s += (i ? "; " : "") + calls[i].str();
  return s;
}

const Specialization& match(const Package::State& s, std::span<const Tensor> xs) {
  for (size_t k = 0; k < s.calls.size(); ++k) {
    const CallSignature& c = s.calls[k];
    if (c.shapes.size() != xs.size()) continue;
    bool ok = true;
    for (size_t i = 0; i < xs.size() && ok; ++i) {
      ok = xs[i].shape() == c.shapes[i] && xs[i].dtype() == c.dtypes[i];
    }
    if (ok) return s.specs[k];
  }
  CallSignature got;
  for (const Tensor& x : xs) {
    got.shapes.push_back(x.shape());
    got.dtypes.push_back(x.dtype());
  }
  throw Error("package: inputs " + got.str() + " match none of its specializations; it serves " +
              serves(s.calls) + " (build it with an example call of these shapes to serve them)");
}

std::vector<Tensor> run(const Package::State& s, std::span<const Tensor> xs) {
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined()) {
      throw Error("package: input " + std::to_string(i) + " is an undefined Tensor");
    }
    if (xs[i].device() != s.device) {
      throw Error("package: input " + std::to_string(i) + " is on " + xs[i].device().str() +
                  " and the package runs on " + s.device.str() + "; move it with .to()");
    }
  }
  const Specialization& spec = match(s, xs);
  std::vector<Tensor> dense;  // keeps copies of non-contiguous inputs alive for the call
  dense.reserve(xs.size());
  std::vector<const Tensor*> args(spec.bound.size());
  for (size_t i = 0; i < spec.bound.size(); ++i) args[i] = &spec.bound[i];
  for (const auto& [slot, input] : spec.user_slots) {
    if (xs[input].is_contiguous()) {
      args[slot] = &xs[input];
    } else {
      dense.push_back(xs[input].contiguous());
      args[slot] = &dense.back();
    }
  }
  return spec.exec->run(args);
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
  state->device = backend.device() == Device::Type::cpu ? Device::cpu() : Device::cuda(0);
  const double verify_ms = timer.ms();

  std::map<std::string, Tensor> weights;
  for (auto& [name, t] : contents.weights) {
    state->weight_bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    weights[name] = state->device.is_cpu() ? std::move(t) : t.to(state->device);
  }
  state->weights = weights.size();
  std::map<Digest, std::shared_ptr<const codegen::Executable>> execs;
  for (const auto& [hash, artifact] : contents.graphs) {
    try {
      execs[hash] = runtime::load_artifact(runtime::decode_artifact(artifact), backend);
    } catch (const Error& e) {
      throw Error("package: graph " + hex(hash).substr(0, 16) + " does not load here: " + e.what());
    }
  }
  state->graphs = execs.size();
  const double graphs_ms = timer.ms();
  auto exec_of = [&](const Digest& h) {
    auto it = execs.find(h);
    if (it == execs.end()) {
      throw Error("package is inconsistent: it lacks graph " + hex(h).substr(0, 16) +
                  ", which its manifest runs; build it again");
    }
    return it->second;
  };

  for (runtime::PackageCall& c : m.calls) {
    ir::Graph g = ir::read_canonical(c.graph);
    if (c.bindings.size() != g.inputs.size()) {
      throw Error("package is inconsistent: a graph of " + std::to_string(g.inputs.size()) +
                  " inputs has " + std::to_string(c.bindings.size()) + " bindings");
    }
    Specialization spec;
    std::optional<runtime::RegionPlan> plan;
    if (c.hierarchical) plan = runtime::plan_regions(g, runtime::RegionRule{});
    if (plan && plan->outlined_calls > 0) {
      spec.exec = runtime::hierarchical_executable(
          g, *plan, [&](const runtime::GraphPart& gp) { return exec_of(gp.hash); });
    } else {
      spec.exec = exec_of(ir::graph_hash(g));
    }
    if (m.bf16_products) spec.exec = runtime::with_bf16_products(std::move(spec.exec));
    std::vector<bool> per_call;
    for (size_t i = 0; i < c.bindings.size(); ++i) {
      const runtime::PackageBinding& b = c.bindings[i];
      per_call.push_back(b.user);
      if (b.user) {
        spec.bound.emplace_back();
        spec.user_slots.emplace_back(i, b.input);
        continue;
      }
      auto w = weights.find(b.weight);
      if (w == weights.end()) {
        throw Error("package is inconsistent: it lacks weight " + b.weight + "; build it again");
      }
      spec.bound.push_back(w->second);
    }
    if (m.replay) spec.exec = backend.replayable(std::move(spec.exec), per_call);
    state->calls.push_back(CallSignature{c.shapes, c.dtypes});
    CallSignature out;
    for (ir::ValueId v : g.outputs) {
      out.shapes.push_back(g.meta(v).shape);
      out.dtypes.push_back(g.meta(v).dtype);
    }
    state->outputs.push_back(std::move(out));
    state->specs.push_back(std::move(spec));
    c.graph = {};
  }
  state->manifest = std::move(m);
  ZC_LOG(timing) << "package of " << bytes.size() << " bytes loaded in " << timer.ms()
                 << " ms (verified and decoded " << verify_ms << " ms, weights and graphs "
                 << graphs_ms - verify_ms << " ms): " << state->calls.size()
                 << " specialization(s), " << state->graphs << " graph(s), " << state->weights
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
  os << state_->graphs << " compiled graph(s), " << state_->weights << " weight(s) of "
     << state_->weight_bytes << " bytes\n";
  for (size_t k = 0; k < state_->calls.size(); ++k) {
    os << "serves " << state_->calls[k].str() << " -> " << state_->outputs[k].str() << "\n";
  }
  return os.str();
}

}  // namespace zc::package
