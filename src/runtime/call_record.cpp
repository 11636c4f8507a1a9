#include "runtime/call_record.h"

#include <string>

#include "util/bytes.h"
#include "zc/error.h"

namespace zc::runtime {

namespace {

constexpr uint32_t kRecordVersion = 1;
// Bounds a decoded record must keep: a function of at most this many inputs, of at most this
// rank, on a device index below this.
constexpr uint64_t kMaxInputs = 4096;
constexpr uint64_t kMaxRank = 64;
constexpr uint8_t kMaxDeviceIndex = 64;

[[noreturn]] void malformed(const std::string& what) {
  throw Error("compiled function's call record: " + what);
}

void write_meta(ByteWriter& w, const ops::TensorMeta& m) {
  w.i64s(m.shape);
  w.u8(static_cast<uint8_t>(m.dtype));
  w.u8(static_cast<uint8_t>(m.device.type));
  w.u8(static_cast<uint8_t>(m.device.index));
  w.u8(m.wrapped_number ? 1 : 0);
}

ops::TensorMeta read_meta(ByteReader& r) {
  ops::TensorMeta m;
  const uint64_t rank = r.u64();
  if (rank > kMaxRank)
    malformed("rank " + std::to_string(rank) + " above " + std::to_string(kMaxRank));
  for (uint64_t d = 0; d < rank; ++d) {
    const int64_t size = r.i64();
    if (size < 0 || size > (int64_t{1} << 48)) {
      malformed("size " + std::to_string(size) + " is outside 0..2^48");
    }
    m.shape.push_back(size);
  }
  const uint8_t dtype = r.u8();
  if (dtype >= kNumDTypes) malformed("dtype " + std::to_string(dtype) + " is not a zc dtype");
  m.dtype = static_cast<DType>(dtype);
  const uint8_t type = r.u8();
  if (type > static_cast<uint8_t>(Device::Type::cuda)) {
    malformed("device type " + std::to_string(type) + " is neither cpu (0) nor cuda (1)");
  }
  const uint8_t index = r.u8();
  if (index >= kMaxDeviceIndex || (type == 0 && index != 0)) {
    malformed("device index " + std::to_string(index) + " is not one of its device type");
  }
  m.device = Device{static_cast<Device::Type>(type), index};
  const uint8_t wrapped = r.u8();
  if (wrapped > 1) malformed("wrapped-number flag " + std::to_string(wrapped) + " is not 0 or 1");
  m.wrapped_number = wrapped == 1;
  return m;
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
    for (const ops::TensorMeta& m : call) write_meta(w, m);
  }
  return w.take();
}

std::vector<CallMetas> decode_call_record(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "compiled function's call record");
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
    for (uint64_t i = 0; i < inputs; ++i) call.push_back(read_meta(r));
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
