#include "runtime/cpp_artifact.h"

#include "ir/canonical.h"
#include "runtime/cpp_executable.h"
#include "toolchain/shared_library.h"
#include "util/bytes.h"

namespace zc::runtime {

namespace {
constexpr uint32_t kMagic = 0x31616370;  // "pca1"
}  // namespace

std::string describe(const codegen::CodegenContext& ctx) {
  std::string s =
      "inline_matmul_max_flops=" + std::to_string(ctx.schedule.inline_matmul_max_flops) +
      ",parallel_threshold=" + std::to_string(ctx.emit.parallel_threshold) + ",extern=";
  for (ops::OpId op : ctx.schedule.force_extern) s += std::string(ops::op_def(op).name) + ";";
  return s;
}

std::vector<uint8_t> encode_artifact(const CppArtifact& a) {
  ByteWriter w;
  w.u32(kMagic);
  w.i64(a.ctx.schedule.inline_matmul_max_flops);
  w.i64(a.ctx.emit.parallel_threshold);
  w.u64(a.ctx.schedule.force_extern.size());
  for (ops::OpId op : a.ctx.schedule.force_extern) w.str(ops::op_def(op).name);
  w.u64(a.lowered.size());
  w.raw(a.lowered.data(), a.lowered.size());
  w.u64(a.binary.size());
  w.raw(a.binary.data(), a.binary.size());
  return w.take();
}

CppArtifact decode_artifact(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "compiled graph artifact");
  if (r.u32() != kMagic) throw Error("compiled graph artifact: bad magic");
  CppArtifact a;
  a.ctx.schedule.inline_matmul_max_flops = r.i64();
  a.ctx.emit.parallel_threshold = r.i64();
  uint64_t n = r.u64();
  if (n > 1024) throw Error("compiled graph artifact: bad extern list");
  for (uint64_t i = 0; i < n; ++i) {
    std::string name = r.str();
    const ops::OpDef* def = ops::find_op(name);
    if (!def) throw Error("compiled graph artifact: unknown op '" + name + "'");
    a.ctx.schedule.force_extern.push_back(def->id);
  }
  auto lowered = r.raw(r.u64());
  a.lowered.assign(lowered.begin(), lowered.end());
  auto binary = r.raw(r.u64());
  a.binary.assign(binary.begin(), binary.end());
  if (r.remaining() != 0) throw Error("compiled graph artifact: trailing bytes");
  return a;
}

std::shared_ptr<const Executable> load_artifact(const CppArtifact& a) {
  ir::Graph lowered = ir::read_canonical(a.lowered);
  codegen::CodegenResult code = codegen::codegen_cpp(lowered, a.ctx, /*emit_source=*/false);
  auto lib = toolchain::SharedLibrary::from_bytes(a.binary);
  return make_cpp_executable(std::move(code), std::move(lib));
}

}  // namespace zc::runtime
