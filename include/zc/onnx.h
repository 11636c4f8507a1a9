// ONNX import: a model file exported by torch.onnx (or any ONNX producer) as a zc module.
//
//   auto model = zc::onnx::load("resnet50.onnx");
//   auto fast = zc::compile(model);
//   std::vector<zc::Tensor> out = fast({x});   // the graph's inputs in order, its outputs back
//
// The module's many-input forward takes the graph's inputs (those that are not initializers),
// in the file's order, and returns its outputs in order; its one-tensor call serves a graph
// with one input and one output. Initializers are the module's parameters, named as in the file
// (a dotted name like "layer1.0.conv1.weight" is a path of submodules, as in torch), so they
// load from safetensors and capture as parameters: two files with the same graph and other
// weights compile once. Default-domain opsets 13 to 21 are read; load(path) also reads the
// weights torch's dynamo exporter writes beside the model (NAME.onnx.data: external data), and
// the dims the file leaves symbolic are dynamic when compiled (one compile serves every batch
// size). zc::onnx::supported_ops() lists the operators. A file with anything zc does not
// support raises one zc::Error naming
// every such node; a malformed file (truncated, not ONNX, a cycle, an input nothing defines)
// raises zc::Error naming the cause. Nothing is ever computed wrong silently: a value zc needs
// as a constant (a Reshape's shape) that depends on the inputs raises at the first call.
//
// Built when Debian's libonnx-dev is found (CMake says so); otherwise load() raises zc::Error.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zc/nn.h"

namespace zc::onnx {

// A graph input or output as the file declares it.
struct ValueInfo {
  std::string name;
  DType dtype = DType::f32;
  // Per dim: its size, or -1 where the file names a symbol (dim_names) or gives nothing.
  Shape shape;
  std::vector<std::string> dim_names;  // "" where the dim has a size
  bool has_shape = false;              // false: the file declares no shape
};

class Model : public nn::Module {
 public:
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "zc::onnx::Model"; }
  // Every input dim the file leaves open (a dim_param such as "batch", or no size): compile()
  // serves its sizes from one compile (zc's dynamic shapes).
  std::vector<DynamicDim> variable_dims() const override;

  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  int64_t opset() const;
  std::string producer() const;  // "pytorch 2.11.0", as the file says

  struct Impl;
  explicit Model(std::shared_ptr<const Impl> impl);

 private:
  std::shared_ptr<const Impl> impl_;
};

std::shared_ptr<Model> load(const std::string& path);
// The same from the file's bytes; `what` names them in errors.
std::shared_ptr<Model> load_from_bytes(std::span<const uint8_t> bytes,
                                       const std::string& what = "ONNX model");

// The operator types load() accepts (default domain), sorted.
std::vector<std::string> supported_ops();
// Whether this build reads ONNX files.
bool available();

}  // namespace zc::onnx
