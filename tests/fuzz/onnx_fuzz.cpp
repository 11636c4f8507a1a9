// Fuzzes the ONNX reader (src/onnx/onnx_file.cpp), the part of ONNX import that sees a file
// before anything is computed: arbitrary bytes must parse or be refused with zc::Error (never a
// crash, an out-of-bounds read or undefined behaviour), and every tensor of a model that parses
// must decode or be refused the same way.
#include <cstddef>
#include <cstdint>
#include <span>

#if ZC_FUZZ_HAVE_ONNX
#include "onnx/onnx_file.h"
#include "zc/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zc::onnx_file;
  // Every node passes: the structure checks are what is fuzzed here, not the op table.
  const NodeCheck any = [](const ::onnx::NodeProto& n, int64_t) {
    return n.op_type() == "Unsupported" ? std::string("unsupported") : std::string();
  };
  try {
    ParsedModel m = parse_model(std::span(data, size), "fuzz input", any);
    for (const auto& t : m.proto.graph().initializer()) {
      try {
        (void)decode_tensor(t, "initializer");
      } catch (const zc::Error&) {
      }
    }
    for (const auto& n : m.proto.graph().node()) {
      for (const auto& a : n.attribute()) {
        if (!a.has_t()) continue;
        try {
          (void)decode_tensor(a.t(), "attribute");
        } catch (const zc::Error&) {
        }
      }
    }
  } catch (const zc::Error&) {
  }
  return 0;
}
#else
// Built without libonnx-dev: nothing to fuzz.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) {
  return 0;
}
#endif
