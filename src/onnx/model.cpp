// zc::onnx::Model: an ONNX graph as a module. Loading parses and validates the file
// (onnx_file.h), makes the floating initializers parameters (named by their dotted paths; not
// those a rule reads as numbers) and evaluates Constant nodes once; forward() runs the nodes'
// rules (convert.h) in order on a table of named values.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include "onnx/convert.h"
#include "onnx/external_data.h"
#include "onnx/onnx_file.h"
#include "ops/dispatch.h"
#include "util/log.h"
#include "util/parallel.h"
#include "util/timer.h"
#include "zc/factories.h"
#include "zc/onnx.h"

namespace zc::onnx {

struct Model::Impl {
  onnx_file::ParsedModel parsed;
  std::string what;
  std::vector<ValueInfo> inputs, outputs;
  // Values known at load: Constant nodes' outputs, and initializers that are integers or a
  // single number (shapes, indices, exponents), which rules may need as constants.
  std::unordered_map<std::string, Tensor> constants;
  // The initializers registered as parameters, by name.
  std::unordered_map<std::string, Tensor> parameters;
  // The constants' copies on each device a call has met, made at its first use there.
  mutable std::mutex device_mu;
  mutable std::map<std::tuple<std::string, int, int>, Tensor> on_device;  // name, device
  // Per node: the module scopes its name gives, outermost first, as the exporter wrote them
  // (where a region begins and ends) and as region names.
  std::vector<std::vector<std::string>> scopes, scope_names;
};

namespace {

// A level of a dotted parameter path ("layer1" of "layer1.0.conv1.weight").
class Scope final : public nn::Module {
 public:
  std::string type_name() const override { return "zc::onnx::Scope"; }
};

ValueInfo info_of(const ::onnx::ValueInfoProto& v, const std::string& what) {
  ValueInfo info;
  info.name = v.name();
  if (!v.has_type() || !v.type().has_tensor_type()) {
    throw Error(what + ": graph input/output '" + v.name() + "' is not a tensor");
  }
  const auto& tt = v.type().tensor_type();
  info.dtype = onnx_file::dtype_of(tt.elem_type(), what + ": '" + v.name() + "'");
  if (tt.has_shape()) {
    info.has_shape = true;
    for (const auto& d : tt.shape().dim()) {
      info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
      info.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
    }
  }
  return info;
}

// Registers `value` as parameter `name` of `root`, its dotted path a chain of Scopes.
Tensor register_path(nn::Module& root, const std::string& name, const Tensor& value,
                     std::unordered_map<std::string, std::shared_ptr<nn::Module>>& scopes) {
  nn::Module* at = &root;
  std::string prefix;
  size_t start = 0;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
    std::string part = name.substr(start, dot - start);
    if (part.empty()) part = "_";
    prefix += (prefix.empty() ? "" : ".") + part;
    auto& scope = scopes[prefix];
    if (!scope) scope = at->register_module(part, std::make_shared<Scope>());
    at = scope.get();
    start = dot + 1;
  }
  std::string leaf = name.substr(start);
  if (leaf.empty()) leaf = "_";
  return at->register_parameter(leaf, value);
}

// The module scopes of an exporter's node name, as region names: torch names a node
// "/layer1/layer1.0/conv1/Conv" after the module calls it sits in. A trailing ".<index>"
// becomes ".#", so that the copies of a repeated block ("layer1.0", "layer1.1") share a name
// and compare equal as regions (the hierarchical compile then finds them).
std::vector<std::string> scopes_of(const std::string& node_name, bool as_names) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= node_name.size()) {
    size_t slash = node_name.find('/', start);
    if (slash == std::string::npos) slash = node_name.size();
    if (slash > start) parts.push_back(node_name.substr(start, slash - start));
    start = slash + 1;
  }
  if (node_name.empty() || node_name[0] != '/' || parts.empty()) return {};
  parts.pop_back();  // the node's own name
  if (!as_names) return parts;
  for (std::string& p : parts) {
    const size_t dot = p.rfind('.');
    if (dot != std::string::npos && dot + 1 < p.size() &&
        p.find_first_not_of("0123456789", dot + 1) == std::string::npos) {
      p = p.substr(0, dot) + ".#";
    }
  }
  return parts;
}

// The strings of a Python list literal, as torch's dynamo exporter writes its node metadata
// ("['', 'layer1', 'layer1.0', 'add_65']"): each quoted item, in order.
std::vector<std::string> python_strings(const std::string& list) {
  std::vector<std::string> items;
  size_t at = 0;
  while ((at = list.find_first_of("'\"", at)) != std::string::npos) {
    const char quote = list[at];
    const size_t end = list.find(quote, at + 1);
    if (end == std::string::npos) break;
    items.push_back(list.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return items;
}

// A node's metadata (NodeProto.metadata_props, field 9). The field came with ONNX 1.16; an
// older onnx library, as Debian's, parses it as an unknown field, from which it is read then.
std::vector<::onnx::StringStringEntryProto> metadata_of(const ::onnx::NodeProto& node) {
  std::vector<::onnx::StringStringEntryProto> out;
  const auto* reflection = node.GetReflection();
  if (const auto* field = node.GetDescriptor()->FindFieldByName("metadata_props")) {
    for (int i = 0; i < reflection->FieldSize(node, field); ++i) {
      out.push_back(static_cast<const ::onnx::StringStringEntryProto&>(
          reflection->GetRepeatedMessage(node, field, i)));
    }
    return out;
  }
  constexpr int kMetadataPropsField = 9;
  const google::protobuf::UnknownFieldSet& unknown = reflection->GetUnknownFields(node);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& u = unknown.field(i);
    if (u.number() != kMetadataPropsField ||
        u.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    ::onnx::StringStringEntryProto e;
    if (e.ParseFromString(u.length_delimited())) out.push_back(std::move(e));
  }
  return out;
}

// The module scopes of a node of torch's dynamo exporter, which names nodes after their op
// ("node_Conv_12") and writes the scopes as metadata: `pkg.torch.onnx.name_scopes`, each
// module's dotted path from the root ('' first, the op's own name last), and
// `pkg.torch.onnx.class_hierarchy`, each one's class. The paths mark where a region begins and
// ends; the classes ("torchvision.models.resnet.BasicBlock") are the region names, so that the
// copies of a repeated block compare equal as regions, as a C++ module's type name does.
void dynamo_scopes(const ::onnx::NodeProto& node, std::vector<std::string>& path,
                   std::vector<std::string>& names) {
  std::vector<std::string> scopes, classes;
  for (const ::onnx::StringStringEntryProto& p : metadata_of(node)) {
    if (p.key() == "pkg.torch.onnx.name_scopes") scopes = python_strings(p.value());
    if (p.key() == "pkg.torch.onnx.class_hierarchy") classes = python_strings(p.value());
  }
  if (scopes.size() < 3) return;  // the root and the op alone: no module around the node
  path.assign(scopes.begin() + 1, scopes.end() - 1);
  if (classes.size() == scopes.size()) {
    names.assign(classes.begin() + 1, classes.end() - 1);
  } else {
    names = path;
  }
}

// The regions open while nodes run; closed innermost first, also when a node raises.
class OpenRegions {
 public:
  explicit OpenRegions(const void* module) : module_(module) {}
  ~OpenRegions() { close_to(0); }
  // `path`: the scopes as written; `names`: their region names.
  void enter(const std::vector<std::string>& path, const std::vector<std::string>& names) {
    size_t common = 0;
    while (common < path.size() && common < names_.size() && *names_[common] == path[common]) {
      ++common;
    }
    close_to(common);
    for (size_t i = common; i < path.size(); ++i) {
      names_.push_back(&path[i]);
      scopes_.push_back(std::make_unique<ops::RegionScope>(names[i], module_));
    }
  }

 private:
  void close_to(size_t depth) {
    while (scopes_.size() > depth) {
      scopes_.pop_back();
      names_.pop_back();
    }
  }
  const void* module_;
  std::vector<const std::string*> names_;
  std::vector<std::unique_ptr<ops::RegionScope>> scopes_;
};

std::string describe(const ValueInfo& v) {
  std::string dims;
  for (size_t i = 0; i < v.shape.size(); ++i) {
    dims += (i ? "," : "") + (v.shape[i] >= 0 ? std::to_string(v.shape[i])
                                              : (v.dim_names[i].empty() ? "?" : v.dim_names[i]));
  }
  return std::string(dtype_name(v.dtype)) + (v.has_shape ? " [" + dims + "]" : "");
}

}  // namespace

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

const std::vector<ValueInfo>& Model::inputs() const {
  return impl_->inputs;
}
const std::vector<ValueInfo>& Model::outputs() const {
  return impl_->outputs;
}
int64_t Model::opset() const {
  return impl_->parsed.opset;
}
std::vector<DynamicDim> Model::variable_dims() const {
  std::vector<DynamicDim> dims;
  for (size_t i = 0; i < impl_->inputs.size(); ++i) {
    const ValueInfo& v = impl_->inputs[i];
    for (size_t d = 0; v.has_shape && d < v.shape.size(); ++d) {
      if (v.shape[d] < 0) dims.push_back({.input = i, .dim = static_cast<int64_t>(d)});
    }
  }
  return dims;
}

std::string Model::producer() const {
  const auto& p = impl_->parsed.proto;
  return p.producer_name() + (p.producer_version().empty() ? "" : " " + p.producer_version());
}

namespace {

// The tensors a node computes on, on one device: where some are on a GPU (the call's
// activations), the others the file's constants or values computed from shapes on the CPU
// are moved there (a constant once per device, kept); inputs the rule reads as numbers stay.
// A 0-dim tensor stays too: zc's ops take it as a number on any device.
// t on `device`, a broadcast (stride 0 in a dim, as ConstantOfShape makes) kept one: its base
// moves, and the view is made again there (the trace then sees a broadcast, not a constant of
// this call's sizes).
Tensor moved(const Tensor& t, Device device) {
  Tensor base = t;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) == 0) base = base.slice(d, 0, 1);
  }
  return base.numel() < t.numel() ? base.to(device).expand(t.shape()) : t.to(device);
}

void follow_device(const Model::Impl& m, const ::onnx::NodeProto& node,
                   const onnx_import::OpRule& rule, std::vector<Tensor>& ins) {
  Device device = Device::cpu();
  for (const Tensor& t : ins) {
    if (t.defined() && !t.device().is_cpu()) device = t.device();
  }
  if (device.is_cpu()) return;
  for (size_t i = 0; i < ins.size(); ++i) {
    Tensor& t = ins[i];
    if (!t.defined() || !t.device().is_cpu() || t.dim() == 0 ||
        std::find(rule.values.begin(), rule.values.end(), i) != rule.values.end()) {
      continue;
    }
    const std::string& name = node.input(static_cast<int>(i));
    auto constant = m.constants.find(name);
    if (constant == m.constants.end() || constant->second.unsafe_impl() != t.unsafe_impl()) {
      t = moved(t, device);  // computed in this call: moved with it
      continue;
    }
    std::lock_guard lock(m.device_mu);
    auto [it, fresh] = m.on_device.try_emplace(
        {name, static_cast<int>(device.type), static_cast<int>(device.index)});
    if (fresh) it->second = t.to(device);
    t = it->second;
  }
}

}  // namespace

std::vector<Tensor> Model::forward(const std::vector<Tensor>& inputs) {
  const Impl& m = *impl_;
  if (inputs.size() != m.inputs.size()) {
    throw Error(m.what + ": called with " + std::to_string(inputs.size()) +
                " input(s), the graph " + "takes " + std::to_string(m.inputs.size()));
  }
  std::unordered_map<std::string, Tensor> env(m.constants.begin(), m.constants.end());
  for (const auto& [name, t] : m.parameters) env[name] = t;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& v = m.inputs[i];
    const Tensor& x = inputs[i];
    bool fits = x.dtype() == v.dtype;
    if (v.has_shape) {
      fits = fits && x.dim() == static_cast<int64_t>(v.shape.size());
      for (size_t d = 0; fits && d < v.shape.size(); ++d) {
        fits = v.shape[d] < 0 || v.shape[d] == x.size(static_cast<int64_t>(d));
      }
    }
    if (!fits) {
      throw Error(m.what + ": input " + std::to_string(i) + " '" + v.name + "' is " +
                  std::string(dtype_name(x.dtype())) + " " + shape_str(x.shape()) +
                  ", the graph expects " + describe(v));
    }
    env[v.name] = x;
  }
  const auto& g = m.parsed.proto.graph();
  OpenRegions regions(this);
  for (int index : m.parsed.order) {
    const ::onnx::NodeProto& node = g.node(index);
    if (node.op_type() == "Constant") continue;  // in `constants` since load
    regions.enter(m.scopes[static_cast<size_t>(index)], m.scope_names[static_cast<size_t>(index)]);
    std::vector<Tensor> ins;
    for (const std::string& name : node.input()) {
      ins.push_back(name.empty() ? Tensor() : env.at(name));
    }
    const onnx_import::OpRule& rule = *onnx_import::find_rule(node.op_type());
    follow_device(m, node, rule, ins);
    onnx_import::NodeArgs args(node, m.parsed.opset, std::move(ins));
    std::vector<Tensor> outs;
    try {
      outs = rule.fn(args);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind("ONNX node ", 0) == 0) throw;
      throw Error("ONNX node " + onnx_file::node_str(node, index) + ": " + msg);
    }
    for (int k = 0; k < node.output_size(); ++k) {
      if (node.output(k).empty()) continue;
      if (static_cast<size_t>(k) >= outs.size()) {
        throw Error("ONNX node " + onnx_file::node_str(node, index) + ": output " +
                    std::to_string(k) + " is not supported");
      }
      env[node.output(k)] = std::move(outs[static_cast<size_t>(k)]);
    }
  }
  std::vector<Tensor> out;
  for (const ValueInfo& v : m.outputs) out.push_back(env.at(v.name));
  return out;
}

namespace {

// `external`: where the tensors stored outside the file are read from (null: from bytes alone).
std::shared_ptr<Model> load_model(std::span<const uint8_t> bytes, const std::string& what,
                                  const onnx_file::ExternalData* external) {
  Timer timer;
  auto impl = std::make_shared<Model::Impl>();
  impl->what = what;
  impl->parsed = onnx_file::parse_model(bytes, what, onnx_import::check_node);
  const double parse_ms = timer.ms();
  const auto& g = impl->parsed.proto.graph();
  for (int i : impl->parsed.user_inputs) impl->inputs.push_back(info_of(g.input(i), what));
  for (const auto& o : g.output()) impl->outputs.push_back(info_of(o, what));
  for (const auto& node : g.node()) {
    impl->scopes.push_back(scopes_of(node.name(), false));
    impl->scope_names.push_back(scopes_of(node.name(), true));
    if (impl->scopes.back().empty())
      dynamo_scopes(node, impl->scopes.back(), impl->scope_names.back());
  }
  for (const auto& node : g.node()) {
    if (node.op_type() != "Constant") continue;
    onnx_import::NodeArgs a(node, impl->parsed.opset, {});
    const std::string where = "Constant " + onnx_file::node_str(node, -1);
    Tensor t;
    if (const auto* v = a.attr("value")) {
      t = onnx_import::tensor_of(v->t(), where, external);
    } else if (const auto* f = a.attr("value_float")) {
      t = full({}, f->f(), DType::f32);
    } else if (const auto* fs = a.attr("value_floats")) {
      t = from_vector(std::vector<float>(fs->floats().begin(), fs->floats().end()),
                      {fs->floats_size()});
    } else if (const auto* iv = a.attr("value_int")) {
      t = full({}, static_cast<double>(iv->i()), DType::i64);
    } else if (const auto* is = a.attr("value_ints")) {
      t = Tensor::empty({is->ints_size()}, DType::i64);
      std::copy(is->ints().begin(), is->ints().end(), t.data<int64_t>());
    } else {
      throw Error(what + ": " + where + " has no value zc reads");
    }
    if (node.output_size() != 1) throw Error(what + ": " + where + " must have one output");
    impl->constants[node.output(0)] = t;
  }
  // The module: floating initializers of more than one element are parameters, but for those a
  // rule reads as numbers (Resize's scales and roi): a compiled call traces the parameters, and
  // a traced value cannot be read.
  std::vector<std::pair<std::string, Tensor>> params;
  std::unordered_set<std::string> read_as_numbers;
  for (const auto& node : g.node()) {
    const onnx_import::OpRule* rule = onnx_import::find_rule(node.op_type());
    if (!rule) continue;
    for (size_t i : rule->values) {
      if (static_cast<int>(i) < node.input_size())
        read_as_numbers.insert(node.input(static_cast<int>(i)));
    }
  }
  // Each initializer's bytes in the parsed file are released once its tensor holds them: the
  // model kept (the graph's nodes) does not read them again, and a model of N bytes of weights
  // would otherwise hold 2N for as long as it lives.
  // They are copied side by side: the copy is mostly the kernel faulting in fresh pages, which
  // cores do in parallel (a ResNet-50's 100 MB took 50 ms on one).
  auto* inits = impl->parsed.proto.mutable_graph()->mutable_initializer();
  std::vector<Tensor> tensors(static_cast<size_t>(inits->size()));
  run_indexed(tensors.size(), [&](size_t i) {
    auto& init = (*inits)[static_cast<int>(i)];
    tensors[i] =
        onnx_import::tensor_of(init, what + ": initializer '" + init.name() + "'", external);
    std::string().swap(*init.mutable_raw_data());  // clear() would keep the capacity
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int64_data();
    init.clear_int32_data();
  });
  for (int i = 0; i < inits->size(); ++i) {
    auto& init = (*inits)[i];
    Tensor& t = tensors[static_cast<size_t>(i)];
    if (is_floating(t.dtype()) && t.numel() > 1 && !read_as_numbers.count(init.name())) {
      params.emplace_back(init.name(), t);
    } else {
      impl->constants[init.name()] = t;
    }
  }
  auto model = std::make_shared<Model>(impl);
  std::unordered_map<std::string, std::shared_ptr<nn::Module>> scopes;
  for (auto& [name, t] : params) impl->parameters[name] = register_path(*model, name, t, scopes);
  model->eval();
  ZC_LOG(timing) << "onnx: " << what << ": " << bytes.size() << " bytes parsed in " << parse_ms
                 << " ms, " << g.initializer_size() << " initializers and the module in "
                 << timer.ms() - parse_ms << " ms";
  return model;
}

}  // namespace

std::shared_ptr<Model> load_from_bytes(std::span<const uint8_t> bytes, const std::string& what) {
  return load_model(bytes, what, nullptr);
}

std::shared_ptr<Model> load(const std::string& path) {
  // Mapped, not read: the parse is the one pass over the file's pages (a ResNet-50 is 100 MB).
  Timer timer;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    throw Error("zc::onnx::load: cannot read '" + path + "'");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = size ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (data == MAP_FAILED) throw Error("zc::onnx::load: cannot map '" + path + "'");
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() {
      if (p) ::munmap(p, n);
    }
  } unmap{data, size};
  ZC_LOG(timing) << "onnx: mapped " << path << " in " << timer.ms() << " ms";
  // torch's dynamo exporter writes the weights beside the model (NAME.onnx.data).
  const size_t slash = path.rfind('/');
  const onnx_file::ExternalData external(slash == std::string::npos ? "."
                                                                    : path.substr(0, slash + 1));
  return load_model(std::span(static_cast<const uint8_t*>(data), size), path, &external);
}

std::vector<std::string> supported_ops() {
  return onnx_import::rule_names();
}

bool available() {
  return true;
}

}  // namespace zc::onnx
