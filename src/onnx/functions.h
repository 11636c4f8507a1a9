// A model's local functions (ModelProto.functions: torch's dynamo exporter writes a module's
// pieces as functions of its own domain) inlined into its graph, before the graph is validated:
// each node that calls a local function is replaced by the function's nodes, the function's
// own values renamed under the call (so two calls never share a name), its formal inputs and
// outputs bound to the call's, and attribute references (AttributeProto.ref_attr_name) given the
// call's values or the function's defaults. Functions that call functions are inlined in turn;
// a function that calls itself, directly or not, is an error. Like the rest of the file's
// reading, it treats the model as untrusted (it is fuzzed): every defect is a zc::Error naming
// `what` and the function.
#pragma once

#include <string>

#include "onnx/onnx_pb.h"

namespace zc::onnx_file {

// Nothing for a model without functions. Afterwards the graph calls none and `functions` is
// empty.
void inline_local_functions(::onnx::ModelProto& model, const std::string& what);

}  // namespace zc::onnx_file
