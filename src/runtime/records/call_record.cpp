#include "runtime/records/call_record.h"

#include <string>

#include "ops/meta_bytes.h"
#include "runtime/records/codec.h"
#include "zc/error.h"

namespace zc::runtime {

namespace {

// A function of at most this many inputs.
constexpr uint64_t kMaxInputs = 4096;

}  // namespace

CallMetas call_metas(std::span<const Tensor> inputs) {
  CallMetas metas;
  metas.reserve(inputs.size());
  for (const Tensor& t : inputs) metas.push_back(ops::meta_of(t));
  return metas;
}

std::vector<uint8_t> encode_call_record(std::span<const CallMetas> calls) {
  RecordWriter w(kCallRecordFormat);
  w.u64(calls.size());
  for (const CallMetas& call : calls) {
    w.u64(call.size());
    for (const ops::TensorMeta& m : call) ops::write_meta(w, m);
  }
  return w.take();
}

std::vector<CallMetas> decode_call_record(std::span<const uint8_t> bytes) {
  RecordReader r(bytes, kCallRecordFormat);
  std::vector<CallMetas> calls(r.count(kMaxRecordedCalls, "calls"));
  for (CallMetas& call : calls) {
    const uint64_t inputs = r.count(kMaxInputs, "inputs");
    for (uint64_t i = 0; i < inputs; ++i) call.push_back(ops::read_meta(r, kCallRecordFormat.name));
  }
  r.finish("call");
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

}  // namespace zc::runtime
