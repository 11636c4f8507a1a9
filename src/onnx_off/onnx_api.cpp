// zc::onnx in a build without libonnx-dev: nothing loads, and every entry says why.
#include "zc/onnx.h"

namespace zc::onnx {

namespace {
Error unavailable() {
  return Error(
      "zc::onnx: this build of zerocompile reads no ONNX files: Debian's libonnx-dev and "
      "libprotobuf-dev were not found when it was built (scripts/deps.sh installs them)");
}
}  // namespace

struct Model::Impl {};

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
std::vector<Tensor> Model::forward(const std::vector<Tensor>&) {
  throw unavailable();
}
const std::vector<ValueInfo>& Model::inputs() const {
  throw unavailable();
}
const std::vector<ValueInfo>& Model::outputs() const {
  throw unavailable();
}
int64_t Model::opset() const {
  throw unavailable();
}
std::string Model::producer() const {
  throw unavailable();
}
std::shared_ptr<Model> load(const std::string&) {
  throw unavailable();
}
std::shared_ptr<Model> load_from_bytes(std::span<const uint8_t>, const std::string&) {
  throw unavailable();
}
std::vector<std::string> supported_ops() {
  return {};
}
bool available() {
  return false;
}

}  // namespace zc::onnx
