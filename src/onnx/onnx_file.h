// Reading an ONNX file, before anything is computed: the protobuf parsed, the graph's structure
// validated, its nodes put in an order where each reads only what is defined before it, and
// tensors decoded to bytes. Everything here treats the file as untrusted (it is fuzzed): any
// defect raises zc::Error naming it, never a crash. It knows no zc tensors or ops, so the fuzz
// harness builds it alone.
//
// Validated: the bytes parse as a ModelProto with a graph; the default domain's opset is one zc
// reads; its local functions are inlined (onnx/functions.h); names are unique (each value defined
// once); every node input is a graph input, an initializer or a node output, and the nodes form no
// cycle; every graph output is defined; each node passes the caller's check (its op and attributes
// supported), all failures reported at once.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "zc/dtype.h"

namespace zc::onnx_file {

inline constexpr int64_t kMinOpset = 13, kMaxOpset = 21;

struct ParsedModel {
  ::onnx::ModelProto proto;
  int64_t opset = 0;             // the default domain's
  std::vector<int> order;        // node indices, each after what it reads
  std::vector<int> user_inputs;  // graph.input indices that are not initializers
};

// "" when zc supports the node, else why not ("attribute 'auto_pad' = 'SAME_LOWER'").
using NodeCheck = std::function<std::string(const ::onnx::NodeProto&, int64_t opset)>;

// Raises zc::Error naming `what` and the defect.
ParsedModel parse_model(std::span<const uint8_t> bytes, const std::string& what,
                        const NodeCheck& check);

// A tensor's contents: dtype, dims and the little-endian bytes of its elements, validated
// against each other.
struct RawTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
// Raises zc::Error naming `what` for an unsupported dtype, external data, negative dims, or data
// whose size does not match.
RawTensor decode_tensor(const ::onnx::TensorProto& t, const std::string& what);
// The same in two steps, for a caller that owns the destination: the dtype and shape
// (validated, `bytes` left empty), then the elements copied to `out` (nbytes of them).
// `external`: the caller reads external data itself (onnx/external_data.h), so a tensor stored
// outside is not an error here; copy_tensor_data is for tensors stored inside.
RawTensor tensor_layout(const ::onnx::TensorProto& t, const std::string& what,
                        bool external = false);
void copy_tensor_data(const ::onnx::TensorProto& t, const RawTensor& layout, void* out);

// ONNX's element type as a zc dtype; zc::Error naming `what` when zc has none.
DType dtype_of(int32_t onnx_type, const std::string& what);
const char* onnx_type_name(int32_t onnx_type);

// "'name' (OpType)", or "#index (OpType)" for a node without a name.
std::string node_str(const ::onnx::NodeProto& n, int index);

}  // namespace zc::onnx_file
