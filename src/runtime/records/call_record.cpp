#include "runtime/records/call_record.h"

#include <string>

#include "ops/meta_bytes.h"
#include "util/bytes.h"
#include "zc/error.h"

namespace zc::runtime {

namespace {

// 2: metas in ops/meta_bytes.h's layout (version 1 had its own).
constexpr uint32_t kRecordVersion = 2;
// A function of at most this many inputs.
constexpr uint64_t kMaxInputs = 4096;
constexpr const char* kWhat = "compiled function's call record";

[[noreturn]] void malformed(const std::string& what) {
  throw Error(std::string(kWhat) + ": " + what);
}

}  // namespace

CallMetas call_metas(std::span<const Tensor> inputs) {
  CallMetas metas;
  metas.reserve(inputs.size());
  for (const Tensor& t : inputs) metas.push_back(ops::meta_of(t));
  return metas;
}

std::vector<uint8_t> encode_call_record(std::span<const CallMetas> calls) {
  ByteWriter w;
  w.u32(kRecordVersion);
  w.u64(calls.size());
  for (const CallMetas& call : calls) {
    w.u64(call.size());
    for (const ops::TensorMeta& m : call) ops::write_meta(w, m);
  }
  return w.take();
}

std::vector<CallMetas> decode_call_record(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, kWhat);
  if (const uint32_t v = r.u32(); v != kRecordVersion) {
    malformed("version " + std::to_string(v) + ", expected " + std::to_string(kRecordVersion));
  }
  const uint64_t n = r.u64();
  if (n > kMaxRecordedCalls) {
    malformed(std::to_string(n) + " calls, at most " + std::to_string(kMaxRecordedCalls));
  }
  std::vector<CallMetas> calls(n);
  for (CallMetas& call : calls) {
    const uint64_t inputs = r.u64();
    if (inputs > kMaxInputs) {
      malformed(std::to_string(inputs) + " inputs, at most " + std::to_string(kMaxInputs));
    }
    for (uint64_t i = 0; i < inputs; ++i) call.push_back(ops::read_meta(r, kWhat));
  }
  if (r.remaining() != 0) malformed(std::to_string(r.remaining()) + " bytes after the last call");
  return calls;
}

std::vector<CallMetas> note_call(std::span<const CallMetas> found, const CallMetas& call) {
  std::vector<CallMetas> out{call};
  for (const CallMetas& c : found) {
    if (out.size() == kMaxRecordedCalls) break;
    if (c != call) out.push_back(c);
  }
  return out;
}

cache::Key call_record_key(std::string_view name, std::string_view context) {
  cache::Key key(cache::Level::autotune);
  key.add("record", "compiled function calls v" + std::to_string(kRecordVersion))
      .add("function", std::string(name))
      .add("context", std::string(context));
  return key;
}

}  // namespace zc::runtime
