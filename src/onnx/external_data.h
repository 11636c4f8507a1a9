// A model's external data: the tensors whose bytes live in another file beside the model.
// torch's dynamo exporter writes every exported model so (its weights in NAME.onnx.data, each
// initializer naming its location, offset and length). The files are untrusted like the model:
// a location must be a relative path that stays inside the model's folder, and each tensor's
// range must lie inside its file and hold exactly the tensor's bytes, or zc::Error names the
// defect. Each file is mapped once, read-only, for as long as this object lives (the load).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "onnx/onnx_pb.h"

namespace zc::onnx_file {

// Whether `t`'s data is stored outside the model file.
bool is_external(const ::onnx::TensorProto& t);

class ExternalData {
 public:
  // `dir`: the model file's folder; locations are relative to it.
  explicit ExternalData(std::string dir);
  ~ExternalData();
  ExternalData(const ExternalData&) = delete;
  ExternalData& operator=(const ExternalData&) = delete;

  // The `nbytes` bytes `t` stores outside; zc::Error naming `what` and the defect otherwise.
  // Thread-safe: a load copies initializers side by side.
  std::span<const uint8_t> bytes_of(const ::onnx::TensorProto& t, uint64_t nbytes,
                                    const std::string& what) const;

 private:
  struct Mapping;
  const Mapping& map(const std::string& location, const std::string& what) const;

  std::string dir_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<Mapping>> files_;
};

}  // namespace zc::onnx_file
