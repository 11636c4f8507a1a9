#include "runtime/driver/artifact.h"

#include "codegen/pipeline.h"
#include "ir/canonical.h"
#include "runtime/records/codec.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::runtime {

std::vector<uint8_t> encode_artifact(const Artifact& a) {
  RecordWriter w(kArtifactFormat);
  w.str(a.backend);
  w.u64(a.lowered.size());
  w.raw(a.lowered.data(), a.lowered.size());
  w.u64(a.binary.size());
  w.raw(a.binary.data(), a.binary.size());
  return w.take();
}

Artifact decode_artifact(std::span<const uint8_t> bytes) {
  RecordReader r(bytes, kArtifactFormat);
  Artifact a;
  a.backend = r.str();
  auto lowered = r.raw(r.u64());
  a.lowered.assign(lowered.begin(), lowered.end());
  auto binary = r.raw(r.u64());
  a.binary.assign(binary.begin(), binary.end());
  r.finish("binary");
  return a;
}

std::shared_ptr<const codegen::Executable> load_artifact(const Artifact& a,
                                                         const codegen::Backend& backend) {
  if (a.backend != backend.name()) {
    throw Error("compiled graph artifact: made by backend \"" + a.backend + "\", not \"" +
                std::string(backend.name()) + "\"");
  }
  Timer timer;
  ir::Graph lowered = ir::read_canonical(a.lowered);
  const double decode_ms = timer.ms();
  codegen::CodegenResult code = codegen::codegen(lowered, backend, /*emit_source=*/false);
  ZC_LOG(timing) << "artifact of " << lowered.nodes.size() << " nodes: decoded in " << decode_ms
                 << " ms, scheduled in " << timer.ms() - decode_ms << " ms";
  return backend.load(std::move(code.schedule), std::move(code.plan), a.binary);
}

}  // namespace zc::runtime
