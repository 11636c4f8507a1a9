#include "onnx/onnx_file.h"

#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "onnx/external_data.h"
#include "onnx/functions.h"
#include "zc/error.h"

namespace zc::onnx_file {

namespace {

using ::onnx::TensorProto;

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

bool is_default_domain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

}  // namespace

const char* onnx_type_name(int32_t t) {
  static const char* names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                "int16",      "int32",   "int64",  "string", "bool",
                                "float16",    "double",  "uint32", "uint64", "complex64",
                                "complex128", "bfloat16"};
  return t >= 0 && t < static_cast<int32_t>(std::size(names)) ? names[t] : "unknown";
}

DType dtype_of(int32_t t, const std::string& what) {
  switch (t) {
    case TensorProto::FLOAT:
      return DType::f32;
    case TensorProto::DOUBLE:
      return DType::f64;
    case TensorProto::FLOAT16:
      return DType::f16;
    case TensorProto::BFLOAT16:
      return DType::bf16;
    case TensorProto::INT64:
      return DType::i64;
    case TensorProto::INT32:
      return DType::i32;
    case TensorProto::BOOL:
      return DType::boolean;
    case TensorProto::INT8:
      return DType::i8;
    default:
      throw Error(what + ": element type " + onnx_type_name(t) + " (" + std::to_string(t) +
                  ") is not supported; zc reads float, double, float16, bfloat16, int64, int32, "
                  "int8 and bool");
  }
}

std::string node_str(const ::onnx::NodeProto& n, int index) {
  return (n.name().empty() ? "#" + std::to_string(index) : "'" + n.name() + "'") + " (" +
         n.op_type() + ")";
}

namespace {
uint64_t numel_of(const RawTensor& r) {
  uint64_t n = 1;
  for (int64_t d : r.shape) n *= static_cast<uint64_t>(d);
  return n;
}
}  // namespace

RawTensor tensor_layout(const TensorProto& t, const std::string& what, bool external) {
  RawTensor r;
  r.dtype = dtype_of(t.data_type(), what);
  if (t.has_segment()) throw Error(what + ": segmented tensors are not supported");
  uint64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) throw Error(what + ": negative dim " + std::to_string(d));
    if (d > 0 && numel > std::numeric_limits<uint32_t>::max() / static_cast<uint64_t>(d)) {
      throw Error(what + ": more than 2^32 elements");
    }
    numel *= static_cast<uint64_t>(d);
    r.shape.push_back(d);
  }
  const uint64_t nbytes = numel * dtype_size(r.dtype);
  auto check = [&](uint64_t got, const char* field) {
    if (got != numel) {
      throw Error(what + ": its dims give " + std::to_string(numel) + " elements but " + field +
                  " holds " + std::to_string(got));
    }
  };
  if (is_external(t)) {
    if (!external) {
      throw Error(what +
                  ": its data is stored outside the model file (external data); load the model "
                  "with zc::onnx::load(path), which reads it from beside the model");
    }
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes) {
      throw Error(what + ": raw_data has " + std::to_string(t.raw_data().size()) +
                  " bytes, its dims and type need " + std::to_string(nbytes));
    }
  } else if (r.dtype == DType::f32) {
    check(static_cast<uint64_t>(t.float_data_size()), "float_data");
  } else if (r.dtype == DType::f64) {
    check(static_cast<uint64_t>(t.double_data_size()), "double_data");
  } else if (r.dtype == DType::i64) {
    check(static_cast<uint64_t>(t.int64_data_size()), "int64_data");
  } else {
    // int32_data holds these, one element per entry (16-bit floats as their bits).
    check(static_cast<uint64_t>(t.int32_data_size()), "int32_data");
  }
  return r;
}

void copy_tensor_data(const TensorProto& t, const RawTensor& layout, void* dst) {
  const uint64_t numel = numel_of(layout), nbytes = numel * dtype_size(layout.dtype);
  auto* out = static_cast<uint8_t*>(dst);
  if (numel == 0) return;
  if (t.has_raw_data()) {
    std::memcpy(out, t.raw_data().data(), nbytes);
    return;
  }
  switch (layout.dtype) {
    case DType::f32:
      std::memcpy(out, t.float_data().data(), nbytes);
      break;
    case DType::f64:
      std::memcpy(out, t.double_data().data(), nbytes);
      break;
    case DType::i64:
      std::memcpy(out, t.int64_data().data(), nbytes);
      break;
    case DType::i32:
    case DType::boolean:
    case DType::i8:
    case DType::f16:
    case DType::bf16:
      for (uint64_t i = 0; i < numel; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        if (layout.dtype == DType::i32) {
          std::memcpy(out + 4 * i, &v, 4);
        } else if (layout.dtype == DType::boolean) {
          out[i] = v != 0;
        } else if (layout.dtype == DType::i8) {
          out[i] = static_cast<uint8_t>(static_cast<int8_t>(v));
        } else {
          const uint16_t bits = static_cast<uint16_t>(v);
          std::memcpy(out + 2 * i, &bits, 2);
        }
      }
      break;
  }
}

RawTensor decode_tensor(const TensorProto& t, const std::string& what) {
  RawTensor r = tensor_layout(t, what);
  r.bytes.resize(numel_of(r) * dtype_size(r.dtype));
  copy_tensor_data(t, r, r.bytes.data());
  return r;
}

ParsedModel parse_model(std::span<const uint8_t> bytes, const std::string& what,
                        const NodeCheck& check) {
  ParsedModel m;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !m.proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw Error(what +
                ": not an ONNX model (its bytes do not parse as one: truncated, or another "
                "format)");
  }
  if (!m.proto.has_graph() || m.proto.ir_version() < 3) {
    throw Error(what + ": not an ONNX model (" +
                (m.proto.has_graph()
                     ? "ir_version " + std::to_string(m.proto.ir_version()) + " is before ONNX 1.1"
                     : std::string("no graph")) +
                ")");
  }
  for (const auto& op : m.proto.opset_import()) {
    if (is_default_domain(op.domain())) m.opset = op.version();
  }
  if (m.opset < kMinOpset || m.opset > kMaxOpset) {
    throw Error(what + ": opset " + std::to_string(m.opset) + " of the default domain; zc reads " +
                std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                " (export with an opset_version in that range)");
  }
  inline_local_functions(m.proto, what);
  const ::onnx::GraphProto& g = m.proto.graph();
  // Where each value is defined: -1 graph input or initializer, else the node's index.
  std::map<std::string, int> defined;
  auto define = [&](const std::string& name, int by, const std::string& where) {
    if (name.empty()) return;
    auto [it, fresh] = defined.emplace(name, by);
    if (!fresh && !(by == -1 && it->second == -1)) {
      throw Error(what + ": value '" + name + "' is defined twice (" + where + ")");
    }
  };
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) throw Error(what + ": an initializer without a name");
    if (!initializers.insert(t.name()).second) {
      throw Error(what + ": initializer '" + t.name() + "' appears twice");
    }
    define(t.name(), -1, "an initializer");
  }
  if (g.sparse_initializer_size() > 0)
    throw Error(what + ": sparse initializers are not supported");
  for (int i = 0; i < g.input_size(); ++i) {
    const std::string& name = g.input(i).name();
    if (name.empty()) throw Error(what + ": a graph input without a name");
    define(name, -1, "a graph input");
    if (!initializers.count(name)) m.user_inputs.push_back(i);
  }
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string& o : g.node(i).output())
      define(o, i, "by node " + node_str(g.node(i), i));
  }
  // Kahn's order over the nodes; a node is ready when everything it reads is defined.
  std::vector<int> waiting(static_cast<size_t>(g.node_size()), 0);
  std::multimap<int, int> readers;  // producer node -> reading node
  std::vector<std::string> problems;
  for (int i = 0; i < g.node_size(); ++i) {
    const ::onnx::NodeProto& n = g.node(i);
    std::set<int> producers;
    for (const std::string& in : n.input()) {
      if (in.empty()) continue;  // an optional input left out
      auto it = defined.find(in);
      if (it == defined.end()) {
        throw Error(what + ": node " + node_str(n, i) + " reads '" + in +
                    "', which no node, graph input or initializer defines (a missing "
                    "initializer?)");
      }
      if (it->second >= 0) producers.insert(it->second);
    }
    for (int p : producers) readers.emplace(p, i);
    waiting[static_cast<size_t>(i)] = static_cast<int>(producers.size());
    if (!is_default_domain(n.domain())) {
      problems.push_back(node_str(n, i) + ": domain '" + n.domain() + "' is not supported");
    } else if (std::string why = check ? check(n, m.opset) : ""; !why.empty()) {
      problems.push_back(node_str(n, i) + ": " + why);
    }
  }
  std::vector<int> ready;
  for (int i = 0; i < g.node_size(); ++i) {
    if (waiting[static_cast<size_t>(i)] == 0) ready.push_back(i);
  }
  // Lowest index first among the ready nodes: a file already in order keeps its order.
  std::set<int> queue(ready.begin(), ready.end());
  while (!queue.empty()) {
    const int i = *queue.begin();
    queue.erase(queue.begin());
    m.order.push_back(i);
    auto [lo, hi] = readers.equal_range(i);
    for (auto it = lo; it != hi; ++it) {
      if (--waiting[static_cast<size_t>(it->second)] == 0) queue.insert(it->second);
    }
  }
  if (m.order.size() != static_cast<size_t>(g.node_size())) {
    std::vector<std::string> stuck;
    for (int i = 0; i < g.node_size() && stuck.size() < 4; ++i) {
      if (waiting[static_cast<size_t>(i)] > 0) stuck.push_back(node_str(g.node(i), i));
    }
    throw Error(what + ": its nodes form a cycle (among " + join(stuck, ", ") + ")");
  }
  for (const auto& o : g.output()) {
    if (!defined.count(o.name())) {
      throw Error(what + ": graph output '" + o.name() + "' is defined by no node or input");
    }
  }
  if (g.output_size() == 0) throw Error(what + ": the graph has no outputs");
  if (m.user_inputs.empty()) throw Error(what + ": the graph has no inputs besides initializers");
  if (!problems.empty()) {
    throw Error(what + ": " + std::to_string(problems.size()) +
                " node(s) zc does not support:\n  " + join(problems, "\n  "));
  }
  return m;
}

}  // namespace zc::onnx_file
