#include "onnx/functions.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include <map>
#include <set>
#include <vector>

#include "zc/error.h"

namespace zc::onnx_file {

namespace {

using ::onnx::AttributeProto;
using ::onnx::FunctionProto;
using ::onnx::NodeProto;

// Deeper than any exporter nests modules; bounds a crafted file's expansion.
constexpr int kMaxDepth = 64;
// Nodes a model may grow to by inlining: a crafted file could otherwise call a function of
// many nodes from many nodes, many levels deep.
constexpr size_t kMaxNodes = size_t{1} << 22;

// A function's attributes with their defaults (FunctionProto.attribute_proto, field 11). The
// field came with ONNX 1.13; an older onnx library, as Debian's, parses it as an unknown field,
// from which it is read then.
std::vector<AttributeProto> attribute_defaults(const FunctionProto& f) {
  std::vector<AttributeProto> out;
  const auto* reflection = f.GetReflection();
  if (const auto* field = f.GetDescriptor()->FindFieldByName("attribute_proto")) {
    for (int i = 0; i < reflection->FieldSize(f, field); ++i) {
      out.push_back(
          static_cast<const AttributeProto&>(reflection->GetRepeatedMessage(f, field, i)));
    }
    return out;
  }
  constexpr int kAttributeProtoField = 11;
  const google::protobuf::UnknownFieldSet& unknown = reflection->GetUnknownFields(f);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& u = unknown.field(i);
    if (u.number() != kAttributeProtoField ||
        u.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    AttributeProto a;
    if (a.ParseFromString(u.length_delimited())) out.push_back(std::move(a));
  }
  return out;
}

struct Inliner {
  const std::string& what;
  std::map<std::pair<std::string, std::string>, const FunctionProto*> functions;  // domain, name
  std::map<const FunctionProto*, std::vector<AttributeProto>> defaults;
  size_t calls = 0;  // numbers the calls, for unique value names
  size_t nodes = 0;

  const FunctionProto* called(const NodeProto& n) const {
    auto it = functions.find({n.domain(), n.op_type()});
    return it == functions.end() ? nullptr : it->second;
  }

  [[noreturn]] void fail(const FunctionProto& f, const std::string& why) const {
    throw Error(what + ": local function '" + f.domain() + "." + f.name() + "': " + why);
  }

  // `node` appended to `out`, or, when it calls a local function, the function's nodes.
  void expand(const NodeProto& node, std::vector<NodeProto>& out,
              std::vector<const FunctionProto*>& stack) {
    const FunctionProto* f = called(node);
    if (!f) {
      if (++nodes > kMaxNodes) throw Error(what + ": inlining its functions makes too many nodes");
      out.push_back(node);
      return;
    }
    for (const FunctionProto* s : stack) {
      if (s == f) fail(*f, "it calls itself");
    }
    if (static_cast<int>(stack.size()) >= kMaxDepth) fail(*f, "calls nest too deep");
    if (node.input_size() > f->input_size() || node.output_size() > f->output_size()) {
      fail(*f, "called with " + std::to_string(node.input_size()) + " inputs and " +
                   std::to_string(node.output_size()) + " outputs; it has " +
                   std::to_string(f->input_size()) + " and " + std::to_string(f->output_size()));
    }
    // The function's names as the call sees them: formal parameters bound to the call's
    // arguments (an optional one left out is ""), everything else renamed under the call.
    const std::string prefix = "zc_inline" + std::to_string(calls++) + "/";
    std::map<std::string, std::string> names;
    for (int i = 0; i < f->input_size(); ++i) {
      names[f->input(i)] = i < node.input_size() ? node.input(i) : "";
    }
    for (int i = 0; i < f->output_size(); ++i) {
      names[f->output(i)] = i < node.output_size() ? node.output(i) : prefix + f->output(i);
    }
    auto rename = [&](const std::string& n) {
      if (n.empty()) return n;
      auto it = names.find(n);
      return it != names.end() ? it->second : prefix + n;
    };
    // The call's attributes, then the function's defaults for those it leaves out.
    std::map<std::string, const AttributeProto*> values;
    for (const AttributeProto& a : node.attribute()) values[a.name()] = &a;
    for (const AttributeProto& a : defaults[f]) values.emplace(a.name(), &a);
    stack.push_back(f);
    for (const NodeProto& inner : f->node()) {
      NodeProto n = inner;
      for (std::string& in : *n.mutable_input()) in = rename(in);
      for (std::string& o : *n.mutable_output()) o = rename(o);
      if (!n.name().empty()) n.set_name(prefix + n.name());
      // Attributes that refer to the function's own: taken from the call, or left out.
      auto* attrs = n.mutable_attribute();
      for (int k = attrs->size() - 1; k >= 0; --k) {
        AttributeProto& a = attrs->at(k);
        if (a.ref_attr_name().empty()) continue;
        auto v = values.find(a.ref_attr_name());
        if (v == values.end()) {
          attrs->DeleteSubrange(k, 1);
          continue;
        }
        const std::string name = a.name();
        a = *v->second;
        a.set_name(name);
        a.clear_ref_attr_name();
      }
      expand(n, out, stack);
    }
    stack.pop_back();
  }
};

}  // namespace

void inline_local_functions(::onnx::ModelProto& model, const std::string& what) {
  if (model.functions_size() == 0) return;
  Inliner in{what, {}, {}, 0, 0};
  for (const FunctionProto& f : model.functions()) {
    if (f.name().empty()) throw Error(what + ": a local function without a name");
    if (!in.functions.emplace(std::make_pair(f.domain(), f.name()), &f).second) {
      throw Error(what + ": local function '" + f.domain() + "." + f.name() + "' appears twice");
    }
    in.defaults[&f] = attribute_defaults(f);
  }
  std::vector<NodeProto> nodes;
  std::vector<const FunctionProto*> stack;
  for (const NodeProto& n : model.graph().node()) in.expand(n, nodes, stack);
  auto* graph = model.mutable_graph();
  graph->clear_node();
  for (NodeProto& n : nodes) *graph->add_node() = std::move(n);
  model.clear_functions();
}

}  // namespace zc::onnx_file
